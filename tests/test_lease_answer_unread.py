"""A lease granted in the answer to an update nobody reads any more must still reach its holder.

A ladder's request is a local activity that asks by update and, when the update's call fails
(an RPC timeout, a cancel, the activity's own deadline on a loaded worker), asks again by
signal. The update it gave up on can still be in the budget, unanswered: the budget then
grants while that update is in flight and, before the fix, sent no signal (the grant was
"in the answer"). The holder, told nothing, waited for its 5-minute re-ask (1 % of ladders in a
1,000-node burst). On the dev server, whose updates are real (test_lease_answered.py)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import ASK_LEASE, LEASE_GRANTED, LEASE_REQUEST
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.disruption.budget import BudgetState, LeaseRequest
from tests.test_budget_burst import idle_ladders
from tests.test_disruption_budget import budget_state
from tests.test_job_watch import eventually
from tests.test_lease_answered import FREE
from workers.controller import controller_worker

# No worker runs the budget, so the update cannot finish; long enough on a busy machine for
# the server to admit it first (the test checks that it did).
WALK_AWAY = timedelta(seconds=10)


async def ask_and_walk_away(budget: WorkflowHandle, req: LeaseRequest) -> None:
    """An update of the budget that the server has taken in, whose answer nobody will read:
    its call times out, as a request's attempt on a loaded worker can."""
    with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError):
        await budget.execute_update(ASK_LEASE.name, req, rpc_timeout=WALK_AWAY)


async def test_a_holder_that_asked_again_by_signal_is_told_its_grant_by_signal(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    pool, queue = f"pool-{uuid.uuid4().hex[:8]}", f"test-{uuid.uuid4()}"
    (holder,) = await idle_ladders(client, pool, 1)  # records the grant signals it gets
    req = LeaseRequest(
        holder=holder, node=f"{pool}-n00", pool=pool, task_queue=queue, pool_size=4, policy=FREE
    )
    budget = await client.start_workflow(
        DISRUPTION_BUDGET_WORKFLOW,
        BudgetState(pool=pool, policy=FREE),
        id=budget_workflow_id(pool),
        task_queue=queue,  # no worker yet: the update waits in the server, admitted
    )
    await ask_and_walk_away(budget, req)
    await LEASE_REQUEST.send(budget, req)  # the request's fallback: it asks by signal
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with controller_worker(client, SimFleet(nodes=1, pool=pool).cluster, executor, queue):

            async def granted() -> BudgetState | None:
                state = await budget_state(client, pool)
                return state if state.grants else None

            state = await eventually(granted)

            async def told() -> bool:
                events = client.get_workflow_handle(holder).fetch_history_events()
                signals = [
                    e.workflow_execution_signaled_event_attributes.signal_name async for e in events
                ]
                return LEASE_GRANTED.name in signals

            await eventually(told, within_s=30)
        budget_events = [e.event_type async for e in budget.fetch_history_events()]
        await budget.terminate("test over")
        await client.get_workflow_handle(holder).terminate("test over")
    # The scenario happened: the update was in the budget when it granted.
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED in budget_events
    assert [h.holder for h in state.holders] == [holder]
