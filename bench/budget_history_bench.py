"""How much the pool budget writes to its history while `make demo` runs (issue 32: "the budget's
history over 5 minutes of the demo stays under a few hundred events").

Runs `remedy demo` with its defaults (16 nodes, a fault every 3 s, runbook time 60 × faster) on
a fresh database for ``--duration`` seconds, then reads the history of pool ``default``'s
``DisruptionBudget`` (every run, across continue-as-new) and prints the busiest 5-minute window
— events by kind — beside the target, and whether the pool was seized then (holders waiting
for people, sampled every 10 s). Then each JobGuard's history (every run), its events per
hour of the run and its ``job_progress`` signals, beside the guard's target (issue 52: 100 an
hour of a steady job). The demo is stopped however the bench ends.

    .venv/bin/python bench/budget_history_bench.py [--duration 600]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from chaos.processes import Processes, sigterm_as_interrupt  # noqa: E402
from contract.messages import BUDGET_STATE, JOB_PROGRESS  # noqa: E402
from contract.names import JOB_GUARD_WORKFLOW, budget_workflow_id  # noqa: E402
from remedy.disruption.held_by_people import seized  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.demo import _free_port  # noqa: E402

WINDOW = timedelta(minutes=5)
TARGET = 300  # "a few hundred"
GUARD_TARGET = 100  # a JobGuard's events per hour of a steady job (issue 52)
LATE = timedelta(minutes=10)
POOL = "default"


def kind(event_type: int) -> str:
    """An event's kind, as the history shows it: WORKFLOW_TASK_STARTED → workflow task."""
    name = EventType.Name(event_type).removeprefix("EVENT_TYPE_")
    for prefix, what in (
        ("WORKFLOW_TASK", "workflow tasks"),
        ("ACTIVITY_TASK", "activities"),
        ("TIMER", "timers"),
        ("MARKER", "markers (patches, local activities)"),
        ("WORKFLOW_EXECUTION_SIGNALED", "signals received"),
        ("SIGNAL_EXTERNAL", "signals sent"),
        ("EXTERNAL_WORKFLOW_EXECUTION_SIGNALED", "signals sent"),
        ("WORKFLOW_EXECUTION_UPDATE", "updates"),
        ("UPSERT", "search-attribute upserts"),
    ):
        if name.startswith(prefix):
            return what
    return name.lower()


async def history(client: Client, workflow_id: str) -> list[tuple[datetime, str]]:
    """Every event of the workflow's runs, oldest first (a continue-as-new starts a new run);
    a signal's kind names it (``signals received: job_progress``)."""
    events: list[tuple[datetime, str]] = []
    async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        handle = client.get_workflow_handle(run.id, run_id=run.run_id)
        async for e in handle.fetch_history_events():
            what = kind(e.event_type)
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                what += f": {e.workflow_execution_signaled_event_attributes.signal_name}"
            events.append((e.event_time.ToDatetime(tzinfo=UTC), what))
    return sorted(events)


async def guards(client: Client) -> dict[str, list[tuple[datetime, str]]]:
    """Each JobGuard's events, by its workflow id."""
    ids = {w.id async for w in client.list_workflows(f"WorkflowType = '{JOB_GUARD_WORKFLOW}'")}
    return {i: await history(client, i) for i in sorted(ids)}


def print_guards(
    every: dict[str, list[tuple[datetime, str]]], duration: float, until: datetime | None = None
) -> None:
    """Per guard: its events over the run and per hour of it, its progress signals, and its
    events in the run's last LATE (until ``until``, the run's end)."""
    progress = f"signals received: {JOB_PROGRESS.name}"
    for workflow_id, events in every.items():
        per_hour = len(events) * 3600 / duration
        verdict = "met" if per_hour <= GUARD_TARGET else "not met"
        print(f"{workflow_id}: {len(events)} events in {duration:.0f} s, {per_hour:.0f} an hour")
        print(f"  (target ≤ {GUARD_TARGET} an hour: {verdict})")
        for what, n in Counter(k for _, k in events).most_common():
            print(f"  {n:5d}  {what}")
        print(f"  {sum(1 for _, k in events if k == progress)} {JOB_PROGRESS.name} signals")
        if events:  # the end of the run: the job steady, or the guard held
            since = events[-1][0] if until is None else until
            late = [k for at, k in events if at >= since - LATE]
            print(f"  {len(late)} events in the run's last {LATE.seconds // 60} minutes", end="")
            print(f" ({len(late) * 3600 // LATE.seconds} an hour at that rate)")


def busiest(events: list[tuple[datetime, str]]) -> tuple[datetime, Counter[str]]:
    """The 5-minute window (starting at an event) with the most events."""
    best_at, best = events[0][0], Counter[str]()
    end = 0
    for start, (at, _) in enumerate(events):
        while end < len(events) and events[end][0] < at + WINDOW:
            end += 1
        if end - start > sum(best.values()):
            best_at, best = at, Counter(k for _, k in events[start:end])
    return best_at, best


async def seized_samples(client: Client, stop: asyncio.Event) -> list[tuple[datetime, bool]]:
    """Every 10 s: whether the pool is seized (remedy.disruption.held_by_people: every share held by
    a
    ladder waiting for a person, ladders waiting behind them)."""
    samples = []
    handle = client.get_workflow_handle(budget_workflow_id(POOL))
    while not stop.is_set():
        try:
            samples.append((datetime.now(UTC), seized(await BUDGET_STATE.ask(handle))))
        except Exception:  # noqa: BLE001 - not started yet, or busy: no sample
            pass
        try:
            await asyncio.wait_for(stop.wait(), 10)
        except TimeoutError:
            pass
    return samples


async def main(duration: float) -> None:
    port, ui = _free_port(), _free_port()
    with tempfile.TemporaryDirectory() as tmp, Processes(Path(tmp)) as procs:
        # It outlives the reading (stopped when the block ends): its server must still answer.
        demo = [sys.executable, "-m", "workers", "demo", "--duration", str(duration + 600)]
        demo += ["--port", str(port), "--ui-port", str(ui), "--db", f"{tmp}/demo.sqlite"]
        procs.add("demo", demo, cwd=ROOT).start()
        client = await _connect(f"127.0.0.1:{port}")
        stop = asyncio.Event()
        sampling = asyncio.create_task(seized_samples(client, stop))
        await asyncio.sleep(duration)
        until = datetime.now(UTC)
        stop.set()
        samples = await sampling
        events = await history(client, budget_workflow_id(POOL))
        guarded = await guards(client)
    at, window = busiest(events)
    total = sum(window.values())
    inside = [s for t, s in samples if at <= t < at + WINDOW]
    print(f"budget of pool {POOL}: {len(events)} events in {duration:.0f} s of the demo")
    print(f"busiest 5 minutes from {at:%H:%M:%S}: {total} events (target ≤ {TARGET}: ", end="")
    print(f"{'met' if total <= TARGET else 'not met'})")
    for what, n in window.most_common():
        print(f"  {n:5d}  {what}")
    print(f"pool seized (every holder waits for people) in {sum(inside)} of {len(inside)} samples")
    print_guards(guarded, duration, until)


async def _connect(address: str) -> Client:
    for _ in range(120):
        try:
            return await connect(address)
        except Exception:  # noqa: BLE001 - the demo's server is still starting
            await asyncio.sleep(1)
    raise SystemExit(f"the demo's server never answered on {address}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0)
    args = parser.parse_args()
    with sigterm_as_interrupt():
        asyncio.run(main(args.duration))
