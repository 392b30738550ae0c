"""The pools' budgets run on a queue and a worker of their own, in every controller.

A ladder asks for its lease inside a workflow task (a local activity that waits for the
budget's answer to an update), and that task holds one of the worker's workflow-task slots
until the answer comes. With the budget on the ladders' queue, a burst of ladders could hold
every slot while the budget's own task, which would answer them, waited for one: nothing moved
until the requests gave up (30 s) and asked again by signal. Here the controller has two slots
and four ladders ask at once; each must get its lease in its update's answer. On the dev
server, whose updates are real (tests/test_lease_answered.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from contract.messages import LEASE_REQUEST
from contract.names import CONTROLLER_TASK_QUEUE, budget_task_queue, budget_workflow_id
from tests.conftest import own_fleet, running_workers
from tests.test_lease_answered import (
    FREE,
    answered_updates,
    events,
    finished,
    grant_signals,
    ladders,
)
from workers.controller import WorkerTuning, controller_worker
from workflows.disruption_budget import DisruptionBudget

UNWATCHED = "task queues cannot be watched for stalls here"
TWO_SLOTS = WorkerTuning(max_concurrent_workflow_tasks=2)


async def test_ladders_holding_every_slot_still_get_their_leases_in_the_answer(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("own-worker", 4)
    async with running_workers(client, fleet, policy=FREE, tuning=TWO_SLOTS) as queues:
        handles = await ladders(client, queues, sorted(fleet.nodes))
        states = await finished(handles)  # within 90 s: a ladder's re-ask is 5 minutes on
        signals = [await grant_signals(client, h) for h in handles]
        answered = await answered_updates(client, queues.pool)
        budget = await client.get_workflow_handle(budget_workflow_id(queues.pool)).describe()
        asked_by_signal = [
            e
            for e in await events(client, budget.id)
            if e.workflow_execution_signaled_event_attributes.signal_name == LEASE_REQUEST.name
        ]
    assert budget.task_queue == budget_task_queue(queues.controller)
    assert all(s.lease_granted_at and s.lease_released_at for s in states)
    # Every request answered by its update; none gave up and asked again by signal.
    assert (answered, signals, asked_by_signal) == (4, [0, 0, 0, 0], [])


async def test_the_controller_runs_the_budgets_on_their_own_worker_and_queue(
    time_env: WorkflowEnvironment,
) -> None:
    with ThreadPoolExecutor(max_workers=2) as executor:
        workers = controller_worker(time_env.client, own_fleet("config", 1).cluster, executor)
    ladders, budgets = workers.ladders.config(), workers.budgets.config()
    assert ladders["task_queue"] == CONTROLLER_TASK_QUEUE
    assert budgets["task_queue"] == "remedy-controller-budgets"
    assert budgets["workflows"] == [DisruptionBudget]
    # A budget started on the ladders' queue before this release still has a worker there.
    assert DisruptionBudget in ladders["workflows"]
    assert budgets["max_cached_workflows"] == WorkerTuning().budgets_cached


@pytest.mark.parametrize("stall_after", [None, timedelta(seconds=1)], ids=["", "watched"])
async def test_the_controller_runs_both_workers_until_it_is_stopped(
    time_env: WorkflowEnvironment, stall_after: timedelta | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Watched or not (the time-skipping server keeps no record of its queues: the watch
    waits), a stopped controller stops both its workers."""
    caplog.set_level(logging.INFO, logger="workers.stall_watch")
    with ThreadPoolExecutor(max_workers=2) as executor:
        workers = controller_worker(time_env.client, own_fleet("run", 1).cluster, executor, "run")
        running = asyncio.create_task(workers.run(stall_after))
        async with asyncio.timeout(120):  # a guard against a hang, not a figure
            while not (workers.ladders.is_running and workers.budgets.is_running):
                await asyncio.sleep(0.01)
            while stall_after and not any(UNWATCHED in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)  # the watch has looked, and found it cannot
        assert not running.done()
        running.cancel()  # what `remedy controller` gets on SIGTERM
        with contextlib.suppress(asyncio.CancelledError):
            await running
    assert workers.ladders.is_shutdown and workers.budgets.is_shutdown
