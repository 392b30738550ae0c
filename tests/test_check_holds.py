"""What an active check leaves behind when it does not give its node back: a failed check's
node keeps counting against the pool's budget until its ladder gives it back, and a check that
failed with the node cordoned leaves an orphaned cordon the scan adopts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from activities.starts import StartActivities
from adapters.sim import SimFleet
from contract.names import active_check_workflow_id, remediation_workflow_id
from remedy.core.errors import ActionFailed
from remedy.core.models import Action, NodeRef
from remedy.disruption.budget import BudgetPolicy, BudgetState, Lease, LeaseRequest
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.scan.active_checks import ActiveCheckPolicy, CheckResult, NodeCheckInput
from remedy.scan.orphans import OrphanCheck
from tests.conftest import running_workers
from tests.ladder import report, state_of, wait_for_phase
from tests.test_active_checks import _check, _mark, _results, _round
from tests.test_disruption_budget import budget_state
from workflows.active_check import ActiveCheck

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_a_node_handed_on_is_held_once_and_its_own_waiting_ladder_takes_the_hold_over() -> None:
    """An active check's lease becomes a hold; the node's ladder, which asked while the check
    still held it, takes the hold over; a hold without a lease needs the node's name."""
    ladder = LeaseRequest(holder="ladder", node="n1", pool="p", task_queue="q", pool_size=2)
    state = BudgetState(
        pool="p", holders=[Lease(holder="check", node="n1", granted_at=NOW)], waiting=[ladder]
    )
    state.hand_to_human("check", NOW)
    state.holders = [h for h in state.holders if h.holder != "check"]
    assert [h.node for h in state.held] == ["n1"] and state.waiting_on_held() == [ladder]
    assert state.take_over_hold(ladder, NOW)
    assert state.held == [] and [h.holder for h in state.holders] == ["ladder"]
    state.hand_to_human("someone", NOW, node="n1")  # the ladder's lease counts the node already
    state.hand_to_human("someone", NOW)  # no lease, no node: nothing to hold
    assert state.held == [] and state.in_use == 1
    state.hand_to_human("ladder-of-n2", NOW, node="n2")  # left for a person before any lease
    assert [h.node for h in state.held] == ["n2"] and state.in_use == 2


def test_a_ladder_on_a_node_held_over_the_cap_waits_for_a_lease_like_any_other() -> None:
    """Found by the ladder model: gpu-2, left for a person without ever holding a lease, is
    held beyond the cap of 1 while gpu-0's ladder holds the lease; gpu-2's next ladder took the
    hold over at once and the pool had two lease holders. Now it waits for gpu-0's release."""
    policy = BudgetPolicy(max_disruption="1")
    state = BudgetState(
        pool="p",
        pool_size=3,
        policy=policy,
        holders=[Lease(holder="ladder-0", node="gpu-0", granted_at=NOW)],
    )
    state.hand_to_human("ladder-2", NOW, node="gpu-2")  # needs_human, no lease: counted
    assert state.in_use == 2 > state.allowed == 1
    again = LeaseRequest(holder="ladder-2b", node="gpu-2", pool="p", task_queue="q", pool_size=3)
    assert not state.take_over_hold(again, NOW, within_cap=True)
    state.holders = []  # gpu-0's ladder released its lease
    assert state.take_over_hold(again, NOW, within_cap=True)
    assert [h.node for h in state.holders] == ["gpu-2"] and state.held == []


async def test_a_busy_node_that_fails_its_check_keeps_the_pool_full_until_it_is_given_back(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """Cap 1: the check's lease becomes a hold when it hands the node to its ladder, so another
    node's lease waits while the node is out (here its ladder waits for an approval that never
    comes), and is granted once a person gives the node back."""
    client = time_env.client
    fleet = SimFleet(nodes=2, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    failing, other = sorted(fleet.nodes)
    now = datetime.now(UTC)
    _mark(fleet, failing, _check(now - timedelta(days=8)))  # busy, past its max age
    _mark(fleet, other, _check(now - timedelta(hours=1)))
    fleet.inject(failing, "silent_under_load", gpu=1)
    replace = Runbook(
        name="replace-once-approved",
        match=Match(checks=["load"], reasons=["FailsUnderLoad"]),
        ladder=[
            Rung(action=Action.REPLACE, approval="required", approval_timeout=timedelta(hours=1))
        ],
    )
    drain = Runbook(name="drain-only", match=Match(xids=[48]), ladder=[Rung(action=Action.DRAIN)])
    runbooks = RunbookSet([replace, *(r for r in shipped_runbooks if r.name != "fails-under-load")])
    # The budget's sweep every 5 minutes, not every one: the two hours waited stay a few dozen
    # workflow tasks, not hundreds (each one slow on a busy machine).
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0, reclaim_every=timedelta(minutes=5))
    async with running_workers(client, fleet, policy=policy, runbooks=runbooks) as queues:
        summary = await _round(client, queues, ActiveCheckPolicy())
        held = await budget_state(client, queues.pool)
        waiter = await report(client, queues, fleet.inject(other, "ecc_dbe"), drain)
        await wait_for_phase(time_env, waiter, Phase.AWAITING_LEASE)
        await time_env.sleep(timedelta(hours=2))  # no one approves: left for a person
        ladder = client.get_workflow_handle(remediation_workflow_id(failing))
        left = await wait_for_phase(time_env, ladder, Phase.DONE)
        still_waiting = await state_of(waiter)
        fleet.cluster.control.restore(failing)  # a person replaced the GPU and gave it back
        state = await wait_for_phase(time_env, waiter, Phase.DONE)
    assert _results(summary) == {failing: CheckResult.FAILED}
    assert [h.node for h in held.held] == [failing] and held.in_use == 1
    assert left.outcome is Outcome.NEEDS_HUMAN
    assert still_waiting.phase is Phase.AWAITING_LEASE and still_waiting.lease_granted_at is None
    assert state.lease_granted_at is not None


async def test_a_check_that_fails_with_its_cordon_on_leaves_an_orphan_the_scan_adopts(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """The uncordon after a passed check fails for good: the check fails with the node under
    remedy's cordon and no ladder ever ran on it. The orphan adoption takes the failed check
    as the evidence that nobody owns the cordon; the ladder it starts gives the node back."""
    client = time_env.client
    fleet = SimFleet(nodes=1, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    [node] = fleet.nodes
    fleet.idle(node)
    fleet.break_action("restore", ActionFailed("the API server refused the patch"))
    ref = NodeRef(name=node, pool=fleet.nodes[node].pool)
    async with running_workers(client, fleet) as queues:
        check = await client.start_workflow(
            ActiveCheck.run,
            NodeCheckInput(node=ref, take_out=False, node_task_queue=queues.agents),
            id=active_check_workflow_id(node),
            task_queue=queues.controller,
        )
        try:
            await check.result()
            raise AssertionError("the check should have failed")
        except WorkflowFailureError:
            pass
        cordoned = fleet.node(node).unschedulable
        fleet.broken.pop("restore")
        starts = StartActivities(client, shipped_runbooks, queues.seal)  # the controller's
        adopted = await starts.adopt_orphaned_cordons(
            OrphanCheck(nodes=[ref], task_queue=queues.controller, node_task_queue=queues.agents)
        )
        ladder = client.get_workflow_handle(remediation_workflow_id(node))
        done = await wait_for_phase(time_env, ladder, Phase.DONE)
    assert cordoned and adopted.nodes == [node]
    assert done.runbook is not None and done.runbook.name == "orphaned-cordon"
    assert done.outcome is Outcome.CLEARED, done.outcome_detail
    assert not fleet.node(node).unschedulable
