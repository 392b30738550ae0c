"""The quarantine breaker over cordons (remedy.disruption.quarantine): a ladder asks its pool's
budget, and
the cluster's, before it takes its node out of scheduling; past the share it waits, and the
breaker closes by itself once the storm subsides or by `remedy resume-pool`. Real ladders on
the time-skipping server; the judgements themselves as pure functions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import CLOSE_BREAKER, CORDON_LEAVE
from contract.names import budget_workflow_id
from remedy.core.events import EventReason
from remedy.core.models import Action, NodeRef
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import CLUSTER_POOL, BudgetPolicy, BudgetState
from remedy.disruption.budget_messages import CordonAsk, ResumeRequest
from remedy.disruption.quarantine import (
    CordonLeave,
    breaker_tripped,
    silence_storm,
)
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import FindingReport, Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from tests.breakers import published
from tests.conftest import Queues, running_workers
from tests.ladder import Handle, signed, state_of, wait_for_phase
from tests.test_cli import cli
from tests.test_disruption_budget import budget_state
from workers.client import report_finding

T0 = datetime(2026, 11, 1, tzinfo=UTC)
POLICY = BudgetPolicy(max_disruption="50%", storm_share=0.2, storm_window=timedelta(minutes=30))
# Cordon, then a long wait before anything disruptive: the cordon is what is watched here.
HOLDS = Runbook(
    name="cordon-and-wait",
    match=Match(xids=[48]),
    tolerance=timedelta(hours=2),
    ladder=[Rung(action=Action.DRAIN)],
)


def _budget(pool: str, size: int, reports: dict[str, str], **policy: object) -> BudgetState:
    return BudgetState(
        pool=pool,
        pool_size=size,
        policy=POLICY.model_copy(update=policy),
        unhealthy=dict.fromkeys(reports, T0),
        unhealthy_pools=reports,
    )


def test_a_pool_trips_past_its_share_and_a_held_ask_keeps_counting() -> None:
    two = _budget("a", 10, {"n1": "a", "n2": "a"})
    three = _budget("a", 10, {"n1": "a", "n2": "a", "n3": "a"})
    assert not breaker_tripped(two) and breaker_tripped(three)
    # The window passed for n3's report, but its ladder still waits to cordon: still out.
    held = two.model_copy(
        update={"asking": [CordonAsk(holder="h", node="n3", pool="a", renewed_at=T0)]}
    )
    assert breaker_tripped(held)


def test_the_cluster_trips_only_across_pools_and_only_with_a_share() -> None:
    one_pool = {f"n{i}": "a" for i in range(5)}
    two_pools = {**{f"n{i}": "a" for i in range(3)}, "m1": "b", "m2": "b"}
    assert not breaker_tripped(_budget(CLUSTER_POOL, 20, one_pool, cluster_share=0.2))
    assert breaker_tripped(_budget(CLUSTER_POOL, 20, two_pools, cluster_share=0.2))
    assert not breaker_tripped(_budget(CLUSTER_POOL, 20, two_pools))  # no cluster share: off


def _node(name: str, pool: str, silent: bool) -> NodeFacts:
    age = timedelta(minutes=30 if silent else 0)
    return NodeFacts(name=name, pool=pool, last_heartbeat=T0 - age, silent_for=age)


def test_silence_is_judged_fleet_wide_first_then_by_pool() -> None:
    every = [_node(f"a{i}", "a", True) for i in range(20)]
    storm = silence_storm(every, every, 0.2, 3, T0)
    assert storm is not None and storm.fleet_wide and (storm.silent, storm.of) == (20, 20)
    later = silence_storm(every, every, 0.2, 3, T0 + timedelta(minutes=5), before=storm)
    assert later is not None and later.since == T0  # the same storm: not alerted again
    # 3 of pool a's 10 silent: 15 % of the fleet, 30 % of the pool: the pool's storm only.
    nodes = [_node(f"a{i}", "a", i < 3) for i in range(10)]
    nodes += [_node(f"b{i}", "b", False) for i in range(10)]
    silent = [n for n in nodes if n.silent_for and n.silent_for > timedelta(0)]
    pool = silence_storm(nodes, silent, 0.2, 3, T0)
    assert pool is not None and not pool.fleet_wide and pool.pools == ["a"]
    assert pool.note().startswith("3 of 10 agents silent in pool a since")
    # One silent agent in a pool of 4 is a fault: its ladder runs.
    small = [_node(f"c{i}", "c", i == 0) for i in range(4)]
    assert silence_storm(small, small[:1], 0.2, 3, T0) is None


async def _sick(
    env: WorkflowEnvironment,
    queues: Queues,
    fleet: SimFleet,
    name: str,
    kind: str = "ecc_dbe",
    runbook: Runbook = HOLDS,
) -> Handle:
    finding = fleet.inject(name, kind, gpu=0)
    handle: Handle = await report_finding(
        env.client,
        NodeRef(name=name, pool=fleet.node(name).pool),
        signed(queues, FindingReport(finding=finding, runbook=runbook)),
        node_task_queue=queues.agents,
        task_queue=queues.controller,
    )
    return handle


async def _trip(
    env: WorkflowEnvironment, queues: Queues, fleet: SimFleet, last: str = "ecc_dbe"
) -> list[Handle]:
    """Three of the pool's ten nodes go bad one after the other (each once the budget published
    what the last one changed): two are cordoned, and the third (its fault: ``last``), which
    tips the breaker, waits with its node in service."""
    handles = []
    for i, name in enumerate(sorted(fleet.nodes)[:3]):
        handles.append(await _sick(env, queues, fleet, name, last if i == 2 else "ecc_dbe"))
        phase = Phase.TOLERATING if len(handles) < 3 else Phase.HELD_BY_BREAKER
        await wait_for_phase(env, handles[-1], phase, step=timedelta(seconds=1))
        await published(env, fleet, queues.pool, len(handles))
    return handles


async def test_the_breaker_holds_the_cordon_that_tips_it_and_lets_it_go_once_the_storm_passes(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, third = sorted(fleet.nodes)[:3]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _trip(time_env, queues, fleet)
        held = await state_of(handles[2])
        out = [n for n in (first, second, third) if fleet.node(n).unschedulable]
        tripped = await budget_state(time_env.client, queues.pool)
        # The reports leave the 30-minute window and no new node goes bad: the storm has
        # passed (only the held node is still out of sorts), and the breaker closes by itself.
        await time_env.sleep(timedelta(minutes=35))
        cordoned = await wait_for_phase(time_env, handles[2], Phase.TOLERATING)
        closed = await budget_state(time_env.client, queues.pool)
    assert out == [first, second] and fleet.node(third).unschedulable
    assert held.cordon is None and held.cordon_asked_of == [queues.pool]
    assert tripped.tripped and tripped.trips == 1 and [a.node for a in tripped.asking] == [third]
    assert "3 of 10 nodes unhealthy" in tripped.breaker_note
    assert held.phase is Phase.HELD_BY_BREAKER
    assert "**held by the quarantine breaker** of " + queues.pool in remediation_details(held)
    assert cordoned.cordon is not None and cordoned.cordon_leave == [queues.pool]
    assert not closed.tripped and closed.trips == 1 and closed.asking == []
    assert closed.breaker_note.startswith("storm over at ")
    assert [(node, reason) for node, reason, _ in fleet.alerts] == [
        (third, EventReason.QUARANTINE),
        (third, EventReason.QUARANTINE_OVER),
    ]


async def test_resume_pool_lets_the_held_cordon_go_and_an_abort_ends_a_held_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    address = time_env.client.service_client.config.target_host
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _trip(time_env, queues, fleet)
        fourth = await _sick(time_env, queues, fleet, sorted(fleet.nodes)[3])
        await wait_for_phase(time_env, fourth, Phase.HELD_BY_BREAKER, step=timedelta(seconds=1))
        aborted = await cli("abort", sorted(fleet.nodes)[3], "--address", address, "--reason", "x")
        resumed = await cli("resume-pool", queues.pool, "--address", address, "--by", "sre")
        cordoned = await wait_for_phase(time_env, handles[2], Phase.TOLERATING)
        budget = await budget_state(time_env.client, queues.pool)
        result = await fourth.result()
    assert aborted[0] == 0 and result.outcome is Outcome.ABORTED
    assert not fleet.node(sorted(fleet.nodes)[3]).unschedulable  # never cordoned
    assert resumed[0] == 0 and f"pool {queues.pool}: breaker closed (resumed by sre" in resumed[1]
    assert cordoned.cordon is not None
    assert not budget.tripped and budget.asking == []


async def test_the_cluster_breaker_holds_a_cordon_that_no_pool_would(
    time_env: WorkflowEnvironment,
) -> None:
    """Two pools of ten, two bad nodes in each: no pool is past 20 %, the fleet is past 15 %."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    other = f"pool-{uuid.uuid4().hex[:8]}"
    for i in range(10):
        fleet.join(f"other-{i:03d}", pool=other)
    policy = POLICY.model_copy(update={"cluster_share": 0.15})
    sick = [*sorted(fleet.nodes)[:2], "other-000", "other-001"]
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        handles = []
        for name in sick:
            handles.append(await _sick(time_env, queues, fleet, name))
            phase = Phase.TOLERATING if len(handles) < 4 else Phase.HELD_BY_BREAKER
            await wait_for_phase(time_env, handles[-1], phase, step=timedelta(seconds=1))
            await published(time_env, fleet, CLUSTER_POOL, len(handles))
        held = await state_of(handles[3])
        in_service = not fleet.node("other-001").unschedulable
        cluster = await budget_state(time_env.client, CLUSTER_POOL)
        pool = await budget_state(time_env.client, other)
        answer = await CLOSE_BREAKER.execute(
            time_env.client.get_workflow_handle(budget_workflow_id(CLUSTER_POOL)),
            ResumeRequest(by="sre"),
        )
        cordoned = await wait_for_phase(time_env, handles[3], Phase.TOLERATING)
    assert cluster.tripped and "4 of 20 nodes unhealthy" in cluster.breaker_note
    assert not pool.tripped  # 2 of 10: the pool's own breaker lets it
    assert held.cordon_asked_of == [other, CLUSTER_POOL] and held.cordon_leave == [other]
    assert in_service and held.cordon is None
    assert answer.note.startswith("resumed by sre")
    assert cordoned.cordon is not None and fleet.node("other-001").unschedulable


async def test_a_held_ladder_whose_node_probes_clean_ends_and_stops_counting(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    third = sorted(fleet.nodes)[2]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _trip(time_env, queues, fleet, last="pcie_degraded")
        fleet.clear_faults(third)  # its fault went away while the breaker held its cordon
        await time_env.sleep(timedelta(minutes=6))  # past its next re-probe
        ended = await state_of(handles[2])  # not result(): it would let the clock run on
        budget = await budget_state(time_env.client, queues.pool)
    assert ended.outcome is Outcome.CLEARED
    assert ended.outcome_detail == "clean re-probe while the breaker held the cordon"
    assert not fleet.node(third).unschedulable and (third, "cordon") not in fleet.actions
    # Withdrawn, and healthy now: 2 of 10 left, the storm subsided and the breaker closed.
    assert budget.asking == [] and third not in budget.unhealthy and not budget.tripped


async def test_a_held_ladder_for_a_fault_only_load_shows_is_not_cleared_by_a_clean_probe(
    time_env: WorkflowEnvironment,
) -> None:
    """A GPU that fails only under load probes clean while it is still faulty: the breaker's
    re-probe cannot see it, so the hold goes on (before, the ladder ended 'cleared': a false
    recovery, the node back in service with its fault; the demo's proven slow node did so)."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    third = sorted(fleet.nodes)[2]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _trip(time_env, queues, fleet, last="silent_under_load")
        await time_env.sleep(timedelta(minutes=6))  # past its next re-probe time
        held = await state_of(handles[2])
    assert held.trigger is not None and held.trigger.check == "load"
    assert held.outcome is None and held.phase is Phase.HELD_BY_BREAKER
    assert (third, "cordon") not in fleet.actions  # still held, not let go either


async def test_nodes_out_of_scheduling_count_toward_the_share_the_breaker_limits(
    time_env: WorkflowEnvironment,
) -> None:
    """Two nodes drained and waiting for a person's replace approval, long past the window:
    they are still out of scheduling, so a third bad node in the pool of ten tips the breaker
    (before, only the reports within the window counted, and the third was cordoned too)."""
    waits = Runbook(
        name="replace-once-approved",
        match=Match(xids=[48]),
        ladder=[Rung(action=Action.DRAIN), Rung(action=Action.REPLACE, approval="required")],
    )
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, third = sorted(fleet.nodes)[:3]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        for name in (first, second):
            handle = await report_finding(
                time_env.client,
                NodeRef(name=name, pool=fleet.node(name).pool),
                signed(
                    queues,
                    FindingReport(finding=fleet.inject(name, "ecc_dbe", gpu=0), runbook=waits),
                ),
                node_task_queue=queues.agents,
                task_queue=queues.controller,
            )
            await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
            await time_env.sleep(timedelta(minutes=35))  # its report leaves the window
        await published(time_env, fleet, queues.pool, 0)  # two out of scheduling: near
        held = await _sick(time_env, queues, fleet, third)
        state = await wait_for_phase(time_env, held, Phase.HELD_BY_BREAKER)
        tripped = await budget_state(time_env.client, queues.pool)
    assert state.cordon is None and not fleet.node(third).unschedulable
    assert tripped.tripped and list(tripped.unhealthy) == [third]
    assert "3 of 10 nodes unhealthy within 0:30:00 or held for people" in tripped.breaker_note
    assert f"({first}, {second}, {third})" in tripped.breaker_note


async def test_leave_to_cordon_sent_by_hand_is_refused_and_the_budgets_is_taken(
    time_env: WorkflowEnvironment,
) -> None:
    """The ladder the breaker holds asked its budget with a token: leave sent by hand (as the
    Web UI's "Send a Signal" offers) without it is refused and the cordon keeps waiting; the
    budget's own leave, once the storm passed, carries it and is taken."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    held_node = sorted(fleet.nodes)[2]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        held = (await _trip(time_env, queues, fleet))[2]
        await CORDON_LEAVE.send(held, CordonLeave(pool=queues.pool))
        await held.signal("cordon_leave", {"pool": queues.pool, "token": "guess"})
        await time_env.sleep(timedelta(seconds=30))
        refused = await state_of(held)
        in_service = not fleet.node(held_node).unschedulable
        await time_env.sleep(timedelta(minutes=35))  # the storm passes: the budget's leave
        cordoned = await wait_for_phase(time_env, held, Phase.TOLERATING)
    assert refused.phase is Phase.HELD_BY_BREAKER and refused.cordon_leave == []
    assert [r.verb for r in refused.refused] == ["cordon_leave", "cordon_leave"]
    assert in_service  # the forged leave cordoned nothing
    assert cordoned.cordon_leave == [queues.pool] and cordoned.cordon is not None
