"""A node a ladder leaves cordoned for a person keeps its share of the pool's budget until it
is restored: after a lease, before any, and in a budget started afresh (split from
tests/test_disruption_budget.py)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import LEASE_RELEASE
from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy, BudgetState, LeaseRelease
from remedy.disruption.budget_messages import HELD_FOR_HUMAN
from remedy.ladder.remediation import Outcome, Phase, RemediationState
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import Queues, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.test_disruption_budget import _decided, budget_state
from tests.test_job_watch import eventually


def _drain_then_human() -> Runbook:
    """Drained, and nothing left to try: the node is left cordoned for a person."""
    return Runbook(name="drain-only", match=Match(xids=[48]), ladder=[Rung(action=Action.DRAIN)])


async def _waits_until_restored(
    env: WorkflowEnvironment, queues: Queues, fleet: SimFleet, held: str, node: str
) -> tuple[RemediationState, RemediationState]:
    """``node``'s ladder waits for a lease while ``held`` is out for a person, still waits
    when the budget looks again, and climbs once a person restores ``held``: its state while
    it waits, and at the end."""
    waiter: Handle = await report(
        env.client, queues, fleet.inject(node, "ecc_dbe"), _drain_then_human()
    )
    await wait_for_phase(env, waiter, Phase.AWAITING_LEASE)
    await env.sleep(timedelta(minutes=10))  # the budget looks again: still cordoned
    still_waiting = await state_of(waiter)
    fleet.cluster.control.restore(held)  # a person fixed it and gave it back
    return still_waiting, await wait_for_phase(env, waiter, Phase.DONE)


async def test_a_node_left_for_a_human_holds_its_share_until_it_is_restored(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        left = await report(
            time_env.client, queues, fleet.inject(first, "ecc_dbe"), _drain_then_human()
        )
        assert (await left.result()).outcome is Outcome.NEEDS_HUMAN
        held = await budget_state(time_env.client, queues.pool)
        still_waiting, state = await _waits_until_restored(time_env, queues, fleet, first, second)
        after = await budget_state(time_env.client, queues.pool)
        budget = time_env.client.get_workflow_handle(budget_workflow_id(queues.pool))
        await LEASE_RELEASE.send(budget, LeaseRelease(holder=HELD_FOR_HUMAN + second))
        released = await eventually(
            lambda: _held(time_env.client, queues.pool, []), within_s=5
        )  # an operator's `remedy release-hold`
    assert [h.node for h in held.held] == [first] and held.holders == [] and held.in_use == 1
    assert still_waiting.phase is Phase.AWAITING_LEASE and still_waiting.lease_granted_at is None
    assert state.lease_granted_at is not None  # granted once the first node was restored
    assert [h.node for h in after.held] == [second]  # now the second one is left for a person
    assert [a for n, a in fleet.actions if n == second] == ["cordon", "drain"]
    assert released.in_use == 0


async def _held(client: Client, pool: str, nodes: list[str]) -> BudgetState | None:
    state = await budget_state(client, pool)
    return state if [h.node for h in state.held] == nodes else None


async def test_a_budget_started_afresh_still_counts_a_node_left_for_a_human(
    dev_env: WorkflowEnvironment,
) -> None:
    """The budget is terminated after a ladder left its node cordoned for a person: the new
    run finds the node from remedy's cordon on it, and the cap of one still holds. On the dev
    server: terminating a workflow on the time-skipping server can leave its clock locked."""
    client = dev_env.client
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    runbook = _drain_then_human().model_copy(update={"watch": timedelta(0)})  # no real waits
    step = timedelta(seconds=0.2)
    async with running_workers(client, fleet, policy=policy) as queues:
        left = await report(client, queues, fleet.inject(first, "ecc_dbe"), runbook)
        assert (await left.result()).outcome is Outcome.NEEDS_HUMAN
        await eventually(lambda: _held(client, queues.pool, [first]))
        await client.get_workflow_handle(budget_workflow_id(queues.pool)).terminate(
            "an operator's mistake"
        )
        waiter: Handle = await report(client, queues, fleet.inject(second, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, waiter, Phase.AWAITING_LEASE, step=step)
        budget = await eventually(lambda: _decided(client, queues.pool, waiter.id))
        still_waiting = await state_of(waiter)
    assert budget.rebuilt and [h.node for h in budget.held] == [first]
    assert [w.holder for w in budget.waiting] == [waiter.id] and budget.holders == []
    assert still_waiting.phase is Phase.AWAITING_LEASE


async def test_a_node_left_for_a_human_before_any_lease_holds_its_share_until_restored(
    time_env: WorkflowEnvironment,
) -> None:
    """Cordoned, then a replace that needs approval: the approval times out before any lease
    was asked for, and the node, out under remedy's cordon, still counts against the pool."""
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second = sorted(fleet.nodes)
    # The sweep every 5 minutes: the hour waited stays a few workflow tasks on a busy machine.
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0, reclaim_every=timedelta(minutes=5))
    approve = Runbook(
        name="replace-once-approved",
        match=Match(xids=[48]),
        ladder=[
            Rung(action=Action.REPLACE, approval="required", approval_timeout=timedelta(hours=1))
        ],
    )
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        left = await report(time_env.client, queues, fleet.inject(first, "ecc_dbe"), approve)
        assert (await left.result()).outcome is Outcome.NEEDS_HUMAN
        held = await budget_state(time_env.client, queues.pool)
        still_waiting, state = await _waits_until_restored(time_env, queues, fleet, first, second)
        never_asked = (await state_of(left)).lease_requested_at is None
    assert never_asked
    assert [h.node for h in held.held] == [first] and held.in_use == 1
    assert still_waiting.phase is Phase.AWAITING_LEASE and still_waiting.lease_granted_at is None
    assert state.lease_granted_at is not None  # granted once the first node was restored
