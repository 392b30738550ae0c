"""A budget whose breaker is closed does not wake to age out unhealthy reports (issue 52: in the
demo a timer and a workflow task every few seconds, a third of the budget's busiest 5 minutes):
an hour of a report a minute, never a storm, sets no timer; a tripped breaker still closes by
itself once its reports age out, with no message to wake it."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import NODE_UNHEALTHY
from contract.names import budget_task_queue, budget_workflow_id
from remedy.disruption.budget import BudgetPolicy, BudgetState, UnhealthyReport
from tests.conftest import Queues, running_workers
from workflows.disruption_budget import DisruptionBudget

POLICY = BudgetPolicy(storm_share=0.2, storm_min_nodes=3, storm_window=timedelta(minutes=10))
POOL_SIZE = 100


async def timers(client: Client, workflow_id: str) -> int:
    handle = client.get_workflow_handle(workflow_id)
    kinds = [e.event_type async for e in handle.fetch_history_events()]
    return kinds.count(EventType.EVENT_TYPE_TIMER_STARTED)


async def unhealthy(
    env: WorkflowEnvironment, budget: WorkflowHandle[object, object], queues: Queues, node: str
) -> None:
    report = UnhealthyReport(
        node=node,
        pool=queues.pool,
        task_queue=queues.controller,
        at=await env.get_current_time(),
        pool_size=POOL_SIZE,
        policy=POLICY,
    )
    await NODE_UNHEALTHY.send(budget, report)


async def test_a_closed_breaker_sets_no_timer_for_its_reports_and_a_tripped_one_still_closes(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    client = time_env.client
    async with running_workers(client, fleet) as queues:
        workflow_id = budget_workflow_id(queues.pool)
        budget = await client.start_workflow(
            DisruptionBudget.run,
            BudgetState(pool=queues.pool, policy=POLICY, pool_size=POOL_SIZE),
            id=workflow_id,
            task_queue=budget_task_queue(queues.controller),
        )
        for minute in range(60):  # one node a minute: never more than 10 in the window of 100
            await unhealthy(time_env, budget, queues, f"node-{minute % 7}")
            await time_env.sleep(timedelta(minutes=1))
        quiet_timers = await timers(client, workflow_id)
        storm = [f"storm-{uuid.uuid4().hex[:4]}-{i}" for i in range(25)]
        for node in storm:  # 25 of 100 at once: past 20 %
            await unhealthy(time_env, budget, queues, node)
        await time_env.sleep(timedelta(seconds=5))
        tripped = (await budget.query(DisruptionBudget.state)).tripped
        await time_env.sleep(timedelta(minutes=15))  # nothing more comes: the reports age out
        after = await budget.query(DisruptionBudget.state)
        await budget.terminate("the test is over")
    assert quiet_timers == 0
    assert tripped
    assert not after.tripped and after.breaker_note.startswith("storm over at ")
