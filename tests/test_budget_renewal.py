"""A pool's budget continues as new once a burst of messages is over, not in the middle of it.
A try in the middle fails (the server will not close a run on messages it has not shown it) and
each failure replays the run's whole history while the pool's ladders wait: 18.5 s without a
grant in a 1,000-node storm (workflows/budget_renewal.py). The dev server suggests
continue-as-new from 40 events (tests/conftest.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from contract.messages import NODE_UNHEALTHY
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.disruption.budget import BudgetPolicy, BudgetState, UnhealthyReport
from tests.conftest import SUGGEST_CONTINUE_AS_NEW_AT, own_fleet, running_workers
from tests.test_job_watch import eventually
from workflows.budget_renewal import RENEWAL

POLICY = BudgetPolicy(max_disruption="1", storm_share=1.0)  # a report never trips it
BURST = 3 * SUGGEST_CONTINUE_AS_NEW_AT  # reports of one node: past the suggestion
WAVE = 8  # reports sent at once


async def test_a_burst_of_reports_ends_in_the_run_it_began_in(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    first = await burst_past_the_suggestion(client)
    events = [e async for e in first.fetch_history_events()]
    kinds = [e.event_type for e in events]
    signalled = kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    failed = kinds.count(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    assert (signalled, failed) == (BURST, 0), "a continue-as-new tried in the burst"
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    # It saw the suggestion while the reports came (a burst taken in one task would pass on
    # the old code too): it waited for a quiet turn.
    waited = [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and e.user_metadata.HasField("summary")
        and pydantic_data_converter.payload_converter.from_payload(e.user_metadata.summary, str)
        == RENEWAL
    ]
    assert waited, "never past the suggestion while busy"


async def burst_past_the_suggestion(client: Client) -> WorkflowHandle[object, object]:
    """A pool's budget started afresh, ``BURST`` reports of one node in waves of ``WAVE``,
    until it continued as new: its first run.
    tests/histories/record_continued.py records that run's history."""
    fleet = own_fleet("budget-burst", 1)
    (node,) = fleet.nodes
    async with running_workers(client, fleet, agents=False, policy=POLICY) as queues:
        budget_id = budget_workflow_id(queues.pool)
        started = await client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=queues.pool, policy=POLICY),
            id=budget_id,
            task_queue=queues.controller,
        )
        budget = client.get_workflow_handle(budget_id)  # whichever run is current
        report = UnhealthyReport(
            node=node,
            pool=queues.pool,
            task_queue=queues.controller,
            at=datetime.now(UTC),
            pool_size=1,
            policy=POLICY,
        )
        # In waves: the budget's tasks run between them, and the burst stays well inside the
        # renewal's QUIET on a busy machine (a quiet turn mid-burst may rightly continue).
        for _ in range(BURST // WAVE):
            await asyncio.gather(*(NODE_UNHEALTHY.send(budget, report) for _ in range(WAVE)))
        await next_run(budget, started.first_execution_run_id)
    return client.get_workflow_handle(budget_id, run_id=started.first_execution_run_id)


async def next_run(budget: WorkflowHandle[object, object], run: str) -> str:
    """The run the budget continued as new into from ``run``: once quiet, seconds after the
    messages stop (the dev server's clock is real)."""

    async def continued() -> str | None:
        current = (await budget.describe()).run_id
        return current if current != run else None

    return await eventually(continued, within_s=60)


async def runs_of(client: Client, workflow_id: str) -> bool:
    """More than one run of ``workflow_id`` is listed: it continued as new."""
    return len([w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]) > 1
