"""Two controller workers on one task queue against one dev server, one of them SIGKILLed
mid-burst: do the ladders spread over both, and does the survivor finish every one of them
with no effect doubled?

The crash tests' world (chaos/): a dev server on an SQLite file, a simulated fleet in a file
that every process shares (each seam call one locked transaction, so a node's effects and its
ledger survive a SIGKILL), the shipped runbooks scaled 60x, the agents in their own process.
Here two controller processes (``python -m chaos controller``, each named, so the histories
say which did each task) serve the controller's queue. Every node of the pool gets a fault at
once; once a third of the ladders' effects have landed, controller B is SIGKILLed and stays
dead. Then: which worker completed each ladder's workflow tasks and started its activities
(from the histories' ``identity``), how long the ladders B had held waited before A took them
(B's sticky queue times out first), and what the crash tests measure: ladders lost or stuck,
keyed effects applied twice, cordons no ladder owns, the lease cap.

    .venv/bin/python bench/scale_out_bench.py [--nodes 100] [--no-kill]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType, TaskQueueType, TimeoutType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecution

from chaos.config import FAULTS, FULL, Size
from chaos.driver import Driver
from chaos.knobs import Knobs
from chaos.measure import ladders, measure
from chaos.processes import Proc, Processes, sigterm_as_interrupt
from chaos.stage import Stage, stage
from workers.tables import plain

RESULTS = Path(__file__).resolve().parent / "results"
KILL_AT = 1 / 3  # of the ladders' keyed effects landed: mid-burst
SURVIVOR, VICTIM = "controller", "controller-b"  # the stage's controller, and the one added
READY_S = 60.0
TIMEOUTS = {
    TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START: "sticky",  # the dead worker's own queue
    TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE: "in flight",  # it took the task, then died
}


class Worker(BaseModel):
    identity: str  # remedy-NAME:USER@HOST, shortened to NAME
    ladders: int  # ladders it completed at least one workflow task of
    workflow_tasks: int
    activities: int  # activity tasks it started on the controller's queue
    tasks_after_kill: int = 0  # workflow tasks completed after the kill


class ScaleOutReport(BaseModel):
    nodes: int
    ladders: int
    wall_s: float
    killed: str | None  # the controller SIGKILLed mid-burst (None: both ran to the end)
    killed_at_s: float | None = None  # after the first report
    running_at_kill: int = 0  # ladders that had workflow tasks after the kill
    held_by_killed: int = 0  # ... of those, ladders whose last task before it the victim ran
    # Workflow tasks the victim left behind that timed out before the survivor took them
    # over, per kind (sticky: on its own queue; in flight: started, never completed), and the
    # latest of those timeouts after the kill.
    stranded: dict[str, int] = {}
    stranded_until_s: float | None = None
    survivor_timeouts: int = 0  # the survivor's own workflow tasks timed out (a busy machine)
    activities_retried: int = 0  # started again on the controller's queue (attempt > 1)
    workers: list[Worker]
    lost: int
    stuck: int
    doubled: int
    orphaned: int
    peak: int  # most ladders holding a lease at once
    cap: int
    outcomes: dict[str, int]


def burst(nodes: int) -> Size:
    """The full crash-test size, with every node of the pool failing at once."""
    return dataclasses.replace(FULL, name="scale-out", nodes=nodes, ladders=nodes, in_flight=nodes)


async def until_polling(client: Client, queue: str, names: set[str]) -> None:
    """Until a worker of each name polls the queue for workflow tasks."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        found = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
        if names <= {named(p.identity) for p in found.pollers}:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"not every controller polls {queue}: see the logs")


def keyed_effects(st: Stage) -> int:
    return sum(1 for _, _, key in st.store.read().fleet.effects if key)


async def kill_mid_burst(st: Stage, victim: Proc, nodes: int) -> datetime:
    """SIGKILL the victim once a third of the burst's disruptive effects landed."""
    while keyed_effects(st) < max(1, round(nodes * KILL_AT)):
        await asyncio.sleep(0.2)
    victim.kill()
    return datetime.now(UTC)


class Tasks(BaseModel):
    """Who did what in one ladder's history: (time, identity) of each completed workflow
    task, and the identity of each activity started on the controller's queue."""

    workflow: list[tuple[datetime, str]]
    activities: list[str]
    # Workflow tasks that timed out: when, how (TIMEOUTS), and whose: the identity that
    # started it (in flight), or the sticky queue it waited on (whose: ``sticky`` says).
    timed_out: list[tuple[datetime, str, str]] = []
    sticky: dict[str, str] = {}  # a worker's sticky queue → its identity
    retried: int = 0  # activities started again on the controller's queue (attempt > 1)


async def tasks_of(client: Client, run: WorkflowExecution, queue: str) -> Tasks:
    handle = client.get_workflow_handle(run.id, run_id=run.run_id)
    tasks = Tasks(workflow=[], activities=[])
    queue_of: dict[int, str] = {}  # a scheduled task's (workflow or activity) queue
    started_by: dict[int, str] = {}  # a started workflow task's worker
    async for e in handle.fetch_history_events():
        at = e.event_time.ToDatetime(UTC)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            queue_of[e.event_id] = e.workflow_task_scheduled_event_attributes.task_queue.name
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started = e.workflow_task_started_event_attributes
            started_by[e.event_id] = started.identity
            tasks.sticky.setdefault(queue_of.get(started.scheduled_event_id, ""), started.identity)
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            tasks.workflow.append((at, e.workflow_task_completed_event_attributes.identity))
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            out = e.workflow_task_timed_out_event_attributes
            kind = TIMEOUTS.get(out.timeout_type, "other")
            whose = started_by.get(out.started_event_id) or queue_of.get(out.scheduled_event_id)
            tasks.timed_out.append((at, kind, whose or ""))
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            queue_of[e.event_id] = e.activity_task_scheduled_event_attributes.task_queue.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started_activity = e.activity_task_started_event_attributes
            if queue_of.get(started_activity.scheduled_event_id) == queue:
                tasks.activities.append(started_activity.identity)
                tasks.retried += started_activity.attempt > 1
    tasks.sticky.pop(queue, None)  # the shared queue is nobody's own
    return tasks


def named(identity: str) -> str:
    """remedy-controller-b:user@host → controller-b."""
    return identity.removeprefix("remedy-").split(":", 1)[0]


def spread(runs: list[Tasks], killed_at: datetime | None) -> tuple[list[Worker], dict[str, Any]]:
    """Per worker: ladders, workflow tasks, activities; and what the kill left: the ladders
    the victim had served last, its workflow tasks that timed out before the survivor took
    them (and the survivor's own that timed out, a machine too busy), activities retried."""
    ladders_of: Counter[str] = Counter()
    wft: Counter[str] = Counter()
    acts: Counter[str] = Counter()
    after: Counter[str] = Counter()
    stranded: Counter[str] = Counter()
    owner = {q: who for tasks in runs for q, who in tasks.sticky.items()}
    until, own = 0.0, 0
    running = held = 0
    for tasks in runs:
        done = [(t, named(who)) for t, who in tasks.workflow]
        ladders_of.update({n for _, n in done})
        wft.update(n for _, n in done)
        acts.update(named(a) for a in tasks.activities)
        if killed_at is None:
            continue
        before = [n for t, n in done if t <= killed_at]
        after.update(n for t, n in done if t > killed_at)
        if any(t > killed_at for t, _ in done):
            running += 1
            held += bool(before) and before[-1] == VICTIM
        for t, kind, whose in tasks.timed_out:
            if t <= killed_at:
                continue
            if named(owner.get(whose, whose)) == VICTIM:
                stranded[kind] += 1
                until = max(until, (t - killed_at).total_seconds())
            else:
                own += 1
    workers = [
        Worker(
            identity=who,
            ladders=ladders_of[who],
            workflow_tasks=wft[who],
            activities=acts[who],
            tasks_after_kill=after[who],
        )
        for who in sorted(set(wft) | set(acts))
    ]
    figures: dict[str, Any] = {"activities_retried": sum(t.retried for t in runs)}
    if killed_at is not None:
        figures |= {
            "running_at_kill": running,
            "held_by_killed": held,
            "stranded": dict(stranded),
            "stranded_until_s": until if stranded else None,
            "survivor_timeouts": own,
        }
    return workers, figures


async def run(nodes: int, kill: bool, workdir: Path) -> ScaleOutReport:
    size = burst(nodes)
    with Processes(workdir / "logs") as procs:
        async with stage("s", procs, workdir, size, Knobs(), seed=1) as st:
            # The stage's controller (started again if it dies) survives; B joins its queue.
            victim = procs.role(
                VICTIM,
                "controller",
                *("--address", st.server.address, "--fleet", str(st.store.path)),
                *("--task-queue", st.controller_queue, "--speedup", str(size.speedup)),
                *("--agents-queue", st.agents_queue, "--name", VICTIM),
            )
            victim.start()
            await until_polling(st.client, st.controller_queue, {SURVIVOR, VICTIM})
            driver = Driver(st, FAULTS)
            start = time.monotonic()
            killer = asyncio.create_task(kill_mid_burst(st, victim, nodes)) if kill else None
            settled = await driver.run(nodes, nodes, size.settle_s)
            wall = time.monotonic() - start
            killed_at = None
            if killer is not None and killer.done():
                killed_at = killer.result()
            elif killer is not None:
                killer.cancel()  # the burst ended before a third of its effects: no kill
            if not settled:
                logging.warning("ladders still running past the deadline: counted as stuck")
            row = await measure(st, "scale out", len(driver.injected))
            runs = await ladders(st.client, st.ladder_prefix)
            histories = [await tasks_of(st.client, r, st.controller_queue) for r in runs]
            started_wall = datetime.now(UTC).timestamp() - (time.monotonic() - start)
    workers, figures = spread(histories, killed_at)
    return ScaleOutReport(
        nodes=nodes,
        ladders=row.ladders,
        wall_s=wall,
        killed=VICTIM if killed_at is not None else None,
        killed_at_s=killed_at.timestamp() - started_wall if killed_at else None,
        workers=workers,
        lost=len(row.lost),
        stuck=len(row.stuck),
        doubled=len(row.doubled),
        orphaned=len(row.orphaned),
        peak=row.peak,
        cap=row.cap,
        outcomes=dict(row.outcomes),
        **figures,
    )


HEADERS = ["worker", "ladders", "workflow tasks", "activities", "tasks after the kill"]


def worker_rows(report: ScaleOutReport) -> list[list[str]]:
    return [
        [w.identity, str(w.ladders), str(w.workflow_tasks), str(w.activities)]
        + [str(w.tasks_after_kill) if report.killed else "-"]
        for w in report.workers
    ]


def verdict(report: ScaleOutReport) -> list[str]:
    """What the run shows, in sentences: spread, the kill, what was lost."""
    on = {w.identity: w.ladders for w in report.workers}
    both = on.get(SURVIVOR, 0) and on.get(VICTIM, 0)
    lines = [
        f"{report.ladders} ladders from {report.nodes} nodes failing at once, "
        f"{report.wall_s:.0f} s to the last one's end; ladders with workflow tasks on "
        f"{SURVIVOR}: {on.get(SURVIVOR, 0)}, on {VICTIM}: {on.get(VICTIM, 0)} "
        f"({'spread over both' if both else 'NOT spread'})."
    ]
    if report.killed and report.killed_at_s is not None:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(report.stranded.items())) or "none"
        until = (
            f", the last {report.stranded_until_s:.0f} s after the kill"
            if report.stranded_until_s is not None
            else ""
        )
        lines.append(
            f"{report.killed} SIGKILLed {report.killed_at_s:.0f} s into the burst: "
            f"{report.running_at_kill} ladders still running, {report.held_by_killed} of them "
            f"last served by it. Its workflow tasks that timed out before {SURVIVOR} took "
            f"them: {kinds}{until}; {SURVIVOR}'s own that timed out after the kill (the "
            f"machine too busy): {report.survivor_timeouts}; controller activities started "
            f"again: {report.activities_retried}."
        )
    found = report.lost + report.stuck + report.doubled + report.orphaned
    fine = not found and report.peak <= report.cap
    lines.append(
        f"lost {report.lost}, stuck {report.stuck}, keyed effects doubled {report.doubled}, "
        f"orphaned cordons {report.orphaned}; leases at once: peak {report.peak}, cap "
        f"{report.cap} — {'nothing lost' if fine else 'FOUND PROBLEMS'}."
    )
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(report.outcomes.items()))
    lines.append(f"outcomes: {outcomes}.")
    return lines


def markdown(report: ScaleOutReport, when: str) -> list[str]:
    table = [
        "| " + " | ".join(HEADERS) + " |",
        "|" + "---|" * len(HEADERS),
        *("| " + " | ".join(row) + " |" for row in worker_rows(report)),
    ]
    return [
        "## Two controllers on one task queue, one SIGKILLed mid-burst",
        "",
        "    .venv/bin/python bench/scale_out_bench.py",
        "",
        f"Measured {when} on the shared 2-core machine (figures indicative). 100 nodes, not "
        "300: every seam call rewrites the shared fleet file (what makes a SIGKILL safe), so "
        "its cost grows with the fleet; the runbooks run 60x, the lease cap is 20 % of the "
        "pool: ladders take turns at their disruptive rungs.",
        "",
        *table,
        "",
        *(f"- {line}" for line in verdict(report)),
    ]


async def main(nodes: int, kill: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="remedy-scale-out-") as tmp:
        report = await run(nodes, kill, Path(tmp))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale_out.json").write_text(report.model_dump_json(indent=2))
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    (RESULTS / "scale_out.md").write_text("\n".join(markdown(report, when)) + "\n")
    print("\n".join(["", *plain(HEADERS, worker_rows(report)), "", *verdict(report)]))
    problems = report.lost + report.stuck + report.doubled + report.orphaned
    return 1 if problems or report.peak > report.cap else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100, help="in the pool; each fails once")
    parser.add_argument("--no-kill", action="store_true", help="both controllers run to the end")
    args = parser.parse_args()
    with sigterm_as_interrupt():
        sys.exit(asyncio.run(main(args.nodes, not args.no_kill)))
