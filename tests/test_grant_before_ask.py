"""A grant that reaches a ladder before its run has asked still counts as its lease, given back
at the end.

Seen at 1,000 nodes failing at once (bench, the budget on the ladders' worker, 2026-12-03): a
ladder's first workflow task ran its local activities, its lease request among them, and timed
out; the request was in the budget, the record of it was lost with the task. The grant came by
signal before the retried task got to its request, so the ladder held its lease without having
asked and, at its end, gave back nothing: 10 of 500 leases stayed counted until the budget's
sweep found their holders closed. Here the budget's grant comes while the ladder waits out its
tolerance window, before its first disruptive rung asks."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.activities import RELEASE_LEASE, REQUEST_LEASE
from contract.messages import LEASE_GRANTED
from remedy.budget import BudgetPolicy, LeaseGrant
from remedy.models import Action, Scope
from remedy.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import own_fleet, running_workers
from tests.ladder import local_activities, report, state_of, wait_for_phase

WAIT_THEN_DRAIN = Runbook(
    name="wait-then-drain",
    match=Match(xids=[48]),
    cordon=True,
    tolerance=timedelta(minutes=10),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
)


async def test_a_grant_before_the_request_is_held_and_given_back(
    time_env: WorkflowEnvironment,
) -> None:
    fleet: SimFleet = own_fleet("granted-first", 1)
    (node,) = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="100%", storm_share=1.0)
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        ladder = await report(
            time_env.client, queues, fleet.inject(node, "ecc_dbe"), WAIT_THEN_DRAIN
        )
        await wait_for_phase(time_env, ladder, Phase.TOLERATING)
        await LEASE_GRANTED.send(ladder, LeaseGrant(pool=queues.pool, scope=Scope.NODE))
        result = await ladder.result()
        state = await state_of(ladder)
        calls = await local_activities(time_env.client, ladder.id)
    assert result.outcome is Outcome.RECOVERED
    assert state.lease_granted_at is not None
    # Held from the grant, and given back: nothing asked again, the release sent.
    assert state.lease_requested_at is not None and state.lease_released_at is not None
    assert REQUEST_LEASE.name not in calls and calls[-1] == RELEASE_LEASE.name, calls
