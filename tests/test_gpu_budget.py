"""The disruption budget in GPUs (remedy/disruption/budget_gpus.py) with real ladders on the
time-skipping
server over the twin: GPU-scoped ladders count their GPU and not their node, node-scoped ones
count every GPU of their node, and a ladder that climbs from its GPU to a reboot waits, holding
its GPU, until the node fits under the GPU cap."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import APPROVE
from remedy.core.models import Action, Scope
from remedy.disruption.budget import BudgetPolicy
from remedy.disruption.budget_gpus import gpus_out
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import ApproveRequest
from tests.conftest import running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.test_disruption_budget import budget_state

BAD = 3
SWEEP = timedelta(minutes=5)  # the ladders wait hours of server time: few budget wake-ups


def held(scope: Scope) -> Runbook:
    """Drain (``scope``), then a reset that waits for an approval: the lease stays held."""
    return Runbook(
        name=f"held-{scope.value}",
        match=Match(xids=[48]),
        cordon=False,
        ladder=[
            Rung(action=Action.DRAIN, scope=scope),
            Rung(action=Action.RESET_GPU, scope=scope, approval="required"),
        ],
    )


def pool(nodes: int) -> tuple[SimFleet, list[str]]:
    fleet = SimFleet(nodes=nodes, gpus_per_node=8, pool=f"pool-{uuid.uuid4().hex[:8]}")
    return fleet, sorted(fleet.nodes)


async def two_run_one_waits(
    env: WorkflowEnvironment, by_node: dict[str, Handle]
) -> tuple[list[str], str]:
    """The two nodes whose ladders got a GPU lease (waiting for the reset's approval) and the
    one whose ladder waits for a lease: in whatever order their requests reached the budget
    (on a busy machine a later report may ask first)."""
    for _ in range(200):
        phases = {n: (await state_of(h)).phase for n, h in by_node.items()}
        running = sorted(n for n, p in phases.items() if p is Phase.AWAITING_APPROVAL)
        waiting = [n for n, p in phases.items() if p is Phase.AWAITING_LEASE]
        if len(running) == 2 and len(waiting) == 1:
            return running, waiting[0]
        await env.sleep(timedelta(seconds=5))
    raise AssertionError(f"not two running and one waiting: {phases}")


async def test_two_gpu_scoped_ladders_run_at_once_under_one_node_and_a_third_waits(
    time_env: WorkflowEnvironment,
) -> None:
    fleet, (a, b, c, _) = pool(4)
    policy = BudgetPolicy(
        max_disruption="1", max_gpus_out="2", storm_share=1.0, reclaim_every=SWEEP
    )
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        by_node: dict[str, Handle] = {}
        for node in (a, b, c):
            finding = fleet.inject(node, "ecc_dbe", gpu=BAD)
            by_node[node] = await report(time_env.client, queues, finding, held(Scope.GPU))
        (first, second), third = await two_run_one_waits(time_env, by_node)
        during = await budget_state(time_env.client, queues.pool)
        await APPROVE.send(by_node[first], ApproveRequest(by="test"))
        assert (await by_node[first].result()).outcome is Outcome.RECOVERED
        await wait_for_phase(time_env, by_node[third], Phase.AWAITING_APPROVAL)
        for node in (second, third):
            await APPROVE.send(by_node[node], ApproveRequest(by="test"))
        results = [(await by_node[n].result()).outcome for n in (second, third)]
        states = {n: await state_of(h) for n, h in by_node.items()}
        after = await budget_state(time_env.client, queues.pool)
    assert sorted((le.node, le.scope, le.gpus) for le in during.holders) == [
        (first, Scope.GPU, [BAD]),
        (second, Scope.GPU, [BAD]),
    ]
    assert during.in_use == 0 and gpus_out(during) == 2  # no node out: GPUs only
    assert [w.node for w in during.waiting] == [third]
    assert results == [Outcome.RECOVERED] * 2
    released, granted = states[first].lease_released_at, states[third].lease_granted_at
    assert released and granted and granted >= released  # the third waited for a GPU back
    assert not any(fleet.node(n).unschedulable for n in (a, b, c))  # never a node out
    assert after.holders == [] and after.waiting == [] and after.grants == 3


async def test_a_node_scoped_ladder_counts_every_gpu_of_its_node(
    time_env: WorkflowEnvironment,
) -> None:
    fleet, (a, b, c) = pool(3)
    # Two nodes may be out, nine GPUs: a's node (8) and one GPU beside it.
    policy = BudgetPolicy(
        max_disruption="2", max_gpus_out="9", storm_share=1.0, reclaim_every=SWEEP
    )
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        node_wide = await report(
            time_env.client, queues, fleet.inject(a, "ecc_dbe", gpu=BAD), held(Scope.NODE)
        )
        await wait_for_phase(time_env, node_wide, Phase.AWAITING_APPROVAL)
        beside = await report(
            time_env.client, queues, fleet.inject(b, "ecc_dbe", gpu=BAD), held(Scope.GPU)
        )
        await wait_for_phase(time_env, beside, Phase.AWAITING_APPROVAL)
        waits = await report(
            time_env.client, queues, fleet.inject(c, "ecc_dbe", gpu=BAD), held(Scope.GPU)
        )
        await wait_for_phase(time_env, waits, Phase.AWAITING_LEASE)
        during = await budget_state(time_env.client, queues.pool)
        await APPROVE.send(node_wide, ApproveRequest(by="test"))
        await wait_for_phase(time_env, waits, Phase.AWAITING_APPROVAL)  # a's 8 GPUs came back
        for handle in (beside, waits):
            await APPROVE.send(handle, ApproveRequest(by="test"))
        outcomes = [(await h.result()).outcome for h in (node_wide, beside, waits)]
    assert sorted((le.node, le.scope) for le in during.holders) == [
        (a, Scope.NODE),
        (b, Scope.GPU),
    ]
    assert during.pool_gpus == 24 and gpus_out(during) == 9  # 8 + 1: a third GPU passes 9
    assert during.in_use == 1 < during.allowed  # a node was still allowed: the GPUs held c
    assert outcomes == [Outcome.RECOVERED] * 3


async def test_a_gpu_ladder_that_climbs_to_reboot_waits_for_the_node_holding_its_gpu(
    time_env: WorkflowEnvironment,
) -> None:
    fleet, (a, b) = pool(2)
    policy = BudgetPolicy(
        max_disruption="1", max_gpus_out="8", storm_share=1.0, reclaim_every=SWEEP
    )
    climbs = Runbook(
        name="gpu-then-reboot",
        match=Match(xids=[48]),
        cordon=False,
        ladder=[Rung(action=Action.DRAIN, scope=Scope.GPU), Rung(action=Action.REBOOT)],
    )
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        other = await report(
            time_env.client, queues, fleet.inject(b, "ecc_dbe", gpu=BAD), held(Scope.GPU)
        )
        await wait_for_phase(time_env, other, Phase.AWAITING_APPROVAL)  # holds b's GPU
        climber = await report(time_env.client, queues, fleet.inject(a, "ecc_dbe", gpu=BAD), climbs)
        waiting = await wait_for_phase(time_env, climber, Phase.AWAITING_LEASE)
        while not waiting.attempts:  # the GPU-scoped drain ran; the reboot waits for the node
            await time_env.sleep(timedelta(seconds=5))
            waiting = await wait_for_phase(time_env, climber, Phase.AWAITING_LEASE)
        during = await budget_state(time_env.client, queues.pool)
        rebooted_before = [n for n, act in fleet.actions if act == "reboot"]
        await APPROVE.send(other, ApproveRequest(by="test"))
        outcomes = [(await h.result()).outcome for h in (other, climber)]
        done = await state_of(climber)
        after = await budget_state(time_env.client, queues.pool)
    assert [a_.action for a_ in waiting.attempts] == [Action.DRAIN]
    # Waiting for the node, a still holds its GPU lease: 1 (b) + 8 (a's node) would pass 8.
    assert sorted((le.node, le.scope) for le in during.holders) == [
        (a, Scope.GPU),
        (b, Scope.GPU),
    ]
    assert [w.node for w in during.waiting] == [a] and gpus_out(during) == 2
    assert rebooted_before == []
    assert outcomes == [Outcome.RECOVERED] * 2
    climbed = [a_.action for a_ in done.attempts if a_.rung >= 0]  # the node drained first
    assert climbed[:3] == [Action.DRAIN, Action.DRAIN, Action.REBOOT]
    assert done.lease_scope is Scope.NODE
    assert after.holders == [] and after.grants == 3  # b's GPU, a's GPU, a's node
