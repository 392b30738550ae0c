"""Status per GPU: a node with a GPU quarantined by a GPU-scoped rung shows as degraded, not in
remediation (it still serves on its other GPUs), and a pool counts the GPUs out."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.sim import SimFleet
from adapters.sim.cluster import sim_cluster
from adapters.sim.node import SimPod
from remedy.detection.node_facts import NodeFacts
from remedy.scan.fleet import ATTENTION, NodeStatus, OpenWork, plan_scan, status_of, summarise
from workers.status import FleetStatus, PoolStatus
from workers.status_table import POOL_HEADERS, pool_rows

AT = datetime(2026, 12, 1, tzinfo=UTC)


def node(name: str = "n", **facts: object) -> NodeFacts:
    return NodeFacts.model_validate({"name": name, "pool": "p", **facts})


def test_a_ladder_on_one_gpu_leaves_the_node_degraded_not_in_remediation() -> None:
    ladder = OpenWork(remediating=["n"])
    assert status_of(node(gpus_out=[3]), ladder) is NodeStatus.DEGRADED
    assert status_of(node(), ladder) is NodeStatus.IN_REMEDIATION
    # a node-level rung took the node out since: the whole node is in remediation
    cordoned = node(gpus_out=[3], unschedulable=True, cordoned_by_remedy=True)
    assert status_of(cordoned, ladder) is NodeStatus.IN_REMEDIATION


def test_a_quarantine_no_ladder_holds_is_degraded_and_needs_a_look_but_no_new_ladder() -> None:
    left = node(gpus_out=[3], silent_for=None)
    assert status_of(left, OpenWork()) is NodeStatus.DEGRADED
    assert NodeStatus.DEGRADED in ATTENTION
    plan = plan_scan([left], OpenWork())
    assert (plan.remediate, plan.cordoned, plan.silent, plan.admit) == ([], [], [], [])


def test_the_pool_counts_gpus_out_and_status_shows_them() -> None:
    nodes = [node("a", gpus_out=[1, 3]), node("b", gpus_out=[0]), node("c")]
    summary = summarise(nodes, OpenWork(remediating=["a", "b"]), AT)
    pool = summary.pools[0]
    assert pool.count(NodeStatus.DEGRADED) == 2 and pool.count(NodeStatus.IN_REMEDIATION) == 0
    assert pool.gpus_out == 3
    row = pool_rows(FleetStatus(pools=[PoolStatus(summary=pool)]))[0]
    assert row[POOL_HEADERS.index("GPUs out")] == "3"
    assert row[POOL_HEADERS.index("degraded")] == "2"


def test_the_twin_reports_its_quarantined_gpus() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=8, pool="p")
    name = "gpu-node-000"
    fleet.node(name).pods = [SimPod(f"infer-{g}", uses_gpus=True, gpus=(g,)) for g in range(8)]
    cluster = sim_cluster(fleet)
    assert cluster.gpu_scope is not None
    cluster.gpu_scope.evict_gpu_pods(name, [3], "k1", kill=False, owner="wf")
    facts = next(f for f in cluster.fleet.nodes() if f.name == name)
    assert facts.gpus_out == [3] and not facts.unschedulable
