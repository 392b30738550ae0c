"""Active checks within bounds: a round cordons at most its pool's idle cap at once, a node a
GPU pod landed on before its cordon is given back unchecked, a large pool's workloads are read
concurrently with heartbeats, and one failed first-seen mark does not fail the round."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import typer
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.active_checks import ActiveCheckActivities
from adapters.sim import SimFleet
from adapters.sim.cluster import SimNodeControl, SimNodeMarks
from adapters.sim.node import SimPod
from remedy.core.errors import ActionRefused
from remedy.core.models import CordonState
from remedy.detection.conditions import GPU_ACTIVE_CHECK, NodeCondition
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import (
    NOT_CHECKED,
    ActiveCheckPolicy,
    CheckResult,
    DueNode,
    NodeWorkload,
    Workloads,
    plan_round,
)
from remedy.scan.cluster import CordonOwner
from remedy.scan.fleet import NodeNames
from tests.conftest import running_workers
from tests.test_active_checks import _check, _mark, _results, _round
from workers.cli.active_checks import active_check_policies
from workers.door import new_seal

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


# -- the idle cap, pure ----------------------------------------------------------------------
def test_the_idle_cap_follows_the_budget_share_and_is_at_least_one() -> None:
    policy = ActiveCheckPolicy()  # 20 %, the budget's default share
    assert policy.idle_cap(10) == 2
    assert policy.idle_cap(3) == 1  # rounds up
    assert ActiveCheckPolicy(idle_at_once="0").idle_cap(10) == 1
    assert ActiveCheckPolicy(idle_at_once="all-but-1").idle_cap(4) == 3


def test_a_capped_round_checks_the_most_overdue_idle_nodes_first() -> None:
    due = [
        DueNode(name="a-never", last_checked=None, stale=False),
        DueNode(name="b-2d", last_checked=NOW - timedelta(days=2), stale=False),
        DueNode(name="c-8d", last_checked=NOW - timedelta(days=8), stale=True),
        DueNode(name="d-5d", last_checked=NOW - timedelta(days=5), stale=False),
        DueNode(name="e-busy", last_checked=NOW - timedelta(days=9), stale=True),
    ]
    idle = dict.fromkeys(["a-never", "b-2d", "c-8d", "d-5d"], NodeWorkload(gpu_pods=0))
    workloads = Workloads(nodes=idle | {"e-busy": NodeWorkload(gpu_pods=1)})
    plan = plan_round(due, workloads, idle_cap=2)
    assert plan.idle == ["c-8d", "d-5d"]
    assert plan.idle_later == ["b-2d", "a-never"]
    assert plan.take_out == ["e-busy"]  # under the budget, not the idle cap
    assert plan_round(due, workloads).idle == ["a-never", "b-2d", "c-8d", "d-5d"]


# -- rounds on the time-skipping server ----------------------------------------------------------
async def test_a_round_cordons_no_more_idle_nodes_at_once_than_its_cap(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=5, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    names = sorted(fleet.nodes)
    now = datetime.now(UTC)
    for days, node in enumerate(names, start=2):  # the last name is the most overdue
        fleet.idle(node)
        _mark(fleet, node, _check(now - timedelta(days=days)))
    policy = ActiveCheckPolicy(idle_at_once="2")
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, policy)
        most_first = fleet.most_out_at_once("cordon")
        fleet.actions.clear()
        again = await _round(time_env.client, queues, policy)
    assert most_first <= 2 and fleet.most_out_at_once("cordon") <= 2
    assert _results(summary) == dict.fromkeys(names[3:], CheckResult.PASSED)
    assert summary.plan.idle_later == names[2::-1]
    assert _results(again) == dict.fromkeys(names[1:3], CheckResult.PASSED)
    assert all(not n.unschedulable for n in fleet.nodes.values())


class _PodLandsFirst(SimNodeControl):
    """A GPU pod is bound to the node just before the round's cordon lands."""

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        with self._fleet.lock:
            self._fleet.node(node).pods.append(SimPod(f"train-{uuid.uuid4().hex[:4]}", True))
        return super().cordon(node, owner)


async def test_a_node_that_got_a_gpu_pod_before_its_cordon_is_given_back_unchecked(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node, other = sorted(fleet.nodes)
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    fleet.idle(node)
    _mark(fleet, node, _check(two_days_ago))
    _mark(fleet, other, _check(datetime.now(UTC)))
    cluster = dataclasses.replace(fleet.cluster, control=_PodLandsFirst(fleet))
    async with running_workers(time_env.client, fleet, cluster=cluster) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())
    assert _results(summary) == {node: CheckResult.DEFERRED}
    assert fleet.actions == [(node, "cordon"), (node, "restore")]
    assert [p.name for p in fleet.nodes[node].pods if p.uses_gpus]  # the job runs on
    # No diagnose ran: the last check is still the one two days ago.
    assert fleet.nodes[node].conditions[GPU_ACTIVE_CHECK].last_heartbeat_time == two_days_ago


class _OneMarkFails(SimNodeMarks):
    def __init__(self, fleet: SimFleet, node: str) -> None:
        super().__init__(fleet)
        self._node = node

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        if node == self._node:
            raise ActionRefused(f"{node}: the API refused the condition")
        super().set_conditions(node, conditions)


async def test_a_failed_first_seen_mark_does_not_fail_the_round(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    refused, marked = sorted(fleet.nodes)  # both never seen, both busy
    cluster = dataclasses.replace(fleet.cluster, marks=_OneMarkFails(fleet, refused))
    async with running_workers(time_env.client, fleet, cluster=cluster) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())
    assert summary.plan.waiting == [refused, marked]
    assert GPU_ACTIVE_CHECK not in fleet.nodes[refused].conditions  # the next round tries again
    assert fleet.nodes[marked].conditions[GPU_ACTIVE_CHECK].reason == NOT_CHECKED


# -- the workloads activity ---------------------------------------------------------------------
class _Together:
    """GPU pod lists that return only once ``parties`` of them are in flight together: read
    one node after another, the first would wait forever (the barrier's timeout ends it)."""

    def __init__(self, fleet: SimFleet, parties: int) -> None:
        self._fleet, self._barrier = fleet, threading.Barrier(parties, timeout=10)

    def gpu_pods(self, node: str) -> list[str]:
        self._barrier.wait()
        return [p.name for p in self._fleet.node(node).pods if p.uses_gpus]


async def test_the_workloads_of_a_pool_are_read_concurrently_with_heartbeats(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    fleet = SimFleet(nodes=8, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    names = sorted(fleet.nodes)
    for node in names[:4]:
        fleet.idle(node)
    acts = ActiveCheckActivities(
        time_env.client, fleet.cluster.marks, _Together(fleet, 4), shipped_runbooks, new_seal()
    )
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    loads = await asyncio.wait_for(env.run(acts.node_workloads, NodeNames(nodes=names)), 60)
    assert {n: w.gpu_pods for n, w in loads.nodes.items()} == {
        n: 0 if n in names[:4] else 1 for n in names
    }
    assert len(beats) == len(names)  # one per node done: alive however large the pool


def test_the_idle_cap_is_a_controller_option_for_every_pool() -> None:
    policies = active_check_policies("1h", "1d", "7d", ["training=12h/3d"], "3")
    assert policies is not None
    default, per_pool = policies
    assert default.idle_at_once == per_pool["training"].idle_at_once == "3"
    with pytest.raises(typer.Exit):
        active_check_policies("1h", "1d", "7d", None, "half")
