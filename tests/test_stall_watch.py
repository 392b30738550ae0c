"""The controller watches its own workflow worker from the server's side and exits when the worker
has stopped taking its tasks (remedy.scan.worker_stall, workers.stall_watch): the SDK worker was
seen
to stop polling for good, with nothing logged (bench/results/lease_priority.md)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from typer.testing import CliRunner

from remedy.scan.worker_stall import QueueLook, StallJudge, stall_after_problem
from workers.cli import app
from workers.controller import WORKFLOW_RUNNER, ControllerWorkers
from workers.stall_watch import WorkerStalled, look

AFTER = timedelta(minutes=5)
POLLED = datetime(2026, 12, 3, 20, 0, tzinfo=UTC)


def test_tasks_waiting_unpolled_for_the_whole_window_are_a_stall() -> None:
    judge = StallJudge(started=0.0, after=AFTER)
    assert judge.judge(QueueLook(3, timedelta(seconds=10), POLLED), now=1.0) is None
    stalled = judge.judge(QueueLook(40, timedelta(minutes=6), POLLED), now=302.0)
    assert stalled == (
        "40 workflow task(s) waiting, the oldest for 360 s, and this worker has not polled "
        "for 301 s"
    )


def test_a_worker_that_polls_is_not_stalled_however_old_the_backlog() -> None:
    judge = StallJudge(started=0.0, after=AFTER)
    for minute in range(1, 20):  # a busy controller: tasks wait long, but it keeps polling
        polled = POLLED + timedelta(minutes=minute)
        assert judge.judge(QueueLook(500, timedelta(minutes=10), polled), now=60.0 * minute) is None


def test_an_empty_or_young_backlog_is_not_a_stall() -> None:
    judge = StallJudge(started=0.0, after=AFTER)
    assert judge.judge(QueueLook(0, timedelta(0), POLLED), now=3600.0) is None  # idle: no work
    assert judge.judge(QueueLook(5, timedelta(minutes=4), POLLED), now=3600.0) is None


def test_silence_counts_from_the_last_change_of_the_poll_time_on_the_watchers_clock() -> None:
    judge = StallJudge(started=0.0, after=AFTER)
    old = QueueLook(9, timedelta(hours=1), POLLED)
    assert judge.judge(old, now=100.0) is None  # first seen at 100: silent since then
    assert judge.judge(old, now=399.0) is None
    # A server clock that is off does not matter: only a change of the value counts.
    earlier = old._replace(last_poll=POLLED - timedelta(days=1))
    assert judge.judge(earlier, now=399.5) is None
    assert judge.judge(earlier, now=699.0) is None
    assert judge.judge(earlier, now=700.0) is not None


def test_a_worker_missing_from_the_pollers_is_silent_since_the_watch_began() -> None:
    judge = StallJudge(started=50.0, after=AFTER)
    unlisted = QueueLook(2, timedelta(minutes=30), None)
    assert judge.judge(unlisted, now=349.0) is None
    stalled = judge.judge(unlisted, now=350.0)
    assert stalled is not None and stalled.endswith("(not among the queue's pollers)")


@pytest.mark.parametrize(
    ("seconds", "refused"), [(0.5, True), (59, True), (0, False), (60, False), (300, False)]
)
def test_the_controller_refuses_a_watch_under_a_minute_and_zero_turns_it_off(
    seconds: float, refused: bool, tmp_path: Path
) -> None:
    """A busy worker's slot can be held for tens of seconds: a shorter watch would restart a
    controller that is only busy."""
    assert (stall_after_problem(timedelta(seconds=seconds)) is not None) is refused
    # A missing runbook folder stops the command right after the checks, before connecting.
    missing = str(tmp_path / "none")
    args = ["controller", "--stall-after", str(seconds), "--runbooks", missing]
    result = CliRunner().invoke(app, args)
    assert ("error: --stall-after: " in result.output) is refused
    assert result.exit_code == 1  # bad input: the flag, or else the missing runbook folder


@workflow.defn(name="SlotHolder")
class SlotHolder:
    """Holds a workflow-task slot: its first task runs a local activity until told to stop."""

    @workflow.run
    async def run(self) -> None:
        await workflow.execute_local_activity(
            "hold_slot", start_to_close_timeout=timedelta(minutes=2)
        )


class Slots:
    def __init__(self) -> None:
        self.held, self.release = asyncio.Event(), asyncio.Event()

    @activity.defn(name="hold_slot")
    async def hold_slot(self) -> None:
        self.held.set()
        await self.release.wait()


def slot_worker(client: Client, queue: str, slots: Slots) -> Worker:
    """Two workflow-task slots: two SlotHolders hold them all."""
    return Worker(
        client,
        task_queue=queue,
        workflows=[SlotHolder],
        activities=[slots.hold_slot],
        workflow_runner=WORKFLOW_RUNNER,
        max_concurrent_workflow_tasks=2,
        max_concurrent_workflow_task_polls=2,
    )


async def test_a_polling_worker_is_found_among_its_queues_pollers(
    dev_env: WorkflowEnvironment,
) -> None:
    client, queue = dev_env.client, f"watched-{uuid.uuid4().hex[:8]}"
    async with slot_worker(client, queue, Slots()) as worker:
        async with asyncio.timeout(60):  # a guard against a hang, not a figure
            while (seen := await look(client, queue, client.identity)).last_poll is None:
                await asyncio.sleep(0.1)
    assert worker.config().get("identity") is None  # the client's identity, as looked for
    assert seen.waiting == 0


@pytest.mark.parametrize("stalls", ["", "-budgets"], ids=["ladders", "budgets"])
async def test_the_controller_stops_with_worker_stalled_when_its_queue_is_not_taken(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, stalls: str
) -> None:
    """Two slots of the ladders' or the budgets' worker, held by tasks whose local activities
    do not end: the next workflow's task waits on that queue and the worker does not poll for
    it. ``run`` must end with WorkerStalled naming the queue rather than wait for ever, even
    though the workers cannot finish their shutdown while those tasks run (the SDK does not
    cancel a local activity)."""
    monkeypatch.setattr("workers.controller.SHUTDOWN_LIMIT", 1.0)
    client, queue = dev_env.client, f"stalled-{uuid.uuid4().hex[:8]}"
    slots = Slots()
    budgets = slot_worker(client, queue + "-budgets", slots)
    workers = ControllerWorkers(slot_worker(client, queue, slots), budgets)
    running = asyncio.create_task(workers.run(stall_after=timedelta(seconds=1)))
    try:
        async with asyncio.timeout(120):  # a guard against a hang, not a figure
            for n in range(3):  # two hold both slots; the third waits, unpolled
                await client.start_workflow(
                    SlotHolder.run, id=f"{queue}-{n}", task_queue=queue + stalls
                )
            with pytest.raises(WorkerStalled) as stalled:
                await running
            stuck = workers.budgets if stalls else workers.ladders
            assert stuck.is_running  # its shutdown still waits on the held slots
            slots.release.set()  # the held tasks end: now the workers can stop
            while workers.ladders.is_running or workers.budgets.is_running:
                await asyncio.sleep(0.05)
    finally:
        slots.release.set()
        running.cancel()
    assert stalled.value.task_queue == queue + stalls
    reason = str(stalled.value)
    assert (
        f"{queue + stalls} has stalled: " in reason and "this worker has not polled for" in reason
    )
