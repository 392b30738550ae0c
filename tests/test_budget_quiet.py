"""The budget's housekeeping runs when something changed, not on every tick (issue 32): a
pool whose only lease is held by a ladder waiting for a person swept every ``reclaim_every``
— in the demo, sped up, every second: 3,165 events in 4.5 minutes. A sweep that finds nothing
now doubles the wait for the next (to 8 × ``reclaim_every``) while nobody waits for a share,
and once (to 2 × ``reclaim_every``) while a ladder waits: a dead holder is reclaimed within
that. Real ladders and budget on the time-skipping server."""

from __future__ import annotations

import doctest
import uuid
from datetime import timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Phase
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import running_workers
from tests.ladder import report, wait_for_phase
from tests.test_disruption_budget import budget_state
from workflows import budget_sweep
from workflows.budget_sweep import WAITING_DOUBLINGS

EVERY = timedelta(minutes=1)
HOLD = Runbook(
    name="hold",
    match=Match(xids=[48]),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)


async def events(client: Client, workflow_id: str) -> int:
    return len([e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()])


async def test_a_pool_held_by_people_sweeps_less_and_still_reclaims_a_dead_holder(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0, reclaim_every=EVERY)
    async with running_workers(client, fleet, policy=policy) as queues:
        budget = budget_workflow_id(queues.pool)
        holder = await report(client, queues, fleet.inject(first, "ecc_dbe"), HOLD)
        await wait_for_phase(time_env, holder, Phase.AWAITING_APPROVAL)  # holds the only lease
        before = await events(client, budget)
        await time_env.sleep(timedelta(hours=1))  # nobody answers: nothing changes
        quiet_hour = await events(client, budget) - before
        # A ladder waits now, behind the holder: the pool is seized, and still quiet.
        waiter = await report(client, queues, fleet.inject(second, "ecc_dbe"), HOLD)
        await wait_for_phase(time_env, waiter, Phase.AWAITING_LEASE)
        before = await events(client, budget)
        await time_env.sleep(timedelta(hours=1))
        seized_hour = await events(client, budget) - before
        # The holder dies: a sweep reclaims its lease for the waiter within 2 × reclaim_every.
        await holder.terminate("operator killed it")
        await time_env.sleep(EVERY * 2**WAITING_DOUBLINGS + timedelta(seconds=5))
        state = await budget_state(client, queues.pool)
        await waiter.terminate("test over")
    # 60 sweeps of a timer, an activity and two workflow tasks each was ~660 events.
    assert quiet_hour < 200, quiet_hour
    # Swept every minute with a waiter: ~700 events (its asks included); every 2 minutes: ~380.
    assert seized_hour < 450, seized_hour
    assert state.reclaimed == 1 and [h.node for h in state.holders] == [second]


def test_the_wait_doubles_to_its_bound() -> None:
    assert doctest.testmod(budget_sweep).failed == 0
