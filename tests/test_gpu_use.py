"""Which pod uses which GPU: pods on MIG instances and DRA claims are GPU pods (kill_job kills
them, a drain asks them to checkpoint, and an active check never takes their node for idle),
read through the official client from the strict API emulator, and in the twin."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.active_checks import ActiveCheckActivities
from adapters.kubernetes.drain import Drain
from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse
from remedy.detection.conditions import GPU_ACTIVE_CHECK
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import ActiveCheckPolicy, DueNode, plan_round
from remedy.scan.fleet import NodeNames
from tests.conftest import running_workers
from tests.kube import NODES, PODS, call, kube, node, pod
from tests.test_active_checks import _check, _mark, _results, _round
from workers.door import new_seal

CLAIMS = "resource.k8s.io/v1/resourceclaims"
SLICES = "resource.k8s.io/v1/resourceslices"
DRIVER = "gpu.nvidia.com"


def mig_pod(name: str, node_name: str = "n1") -> dict[str, Any]:
    made = pod(name, node_name=node_name)
    limits = {"nvidia.com/mig-3g.71gb": "1"}
    made["spec"]["containers"][0]["resources"] = {"limits": limits}
    return made


def dra_pod(name: str, claim: str, node_name: str = "n1") -> dict[str, Any]:
    """A pod whose container uses a claim made from a template (named in the pod's status)."""
    made = pod(name, node_name=node_name)
    made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    made["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    made["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
    return made


def claim(name: str, device: str, driver: str = DRIVER, pool: str = "n1") -> dict[str, Any]:
    """A claim the scheduler allocated ``device`` of the DRA driver's pool (the node's name)."""
    result = {"request": "gpu", "driver": driver, "pool": pool, "device": device}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "jobs"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "g"}}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def gpu_slice(node_name: str = "n1") -> dict[str, Any]:
    """The GPUs NVIDIA's DRA driver publishes for the node: gpu-0 … gpu-7 and a MIG device."""
    devices = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}, "type": {"string": "gpu"}}}
        for i in range(8)
    ]
    devices.append(
        {
            "name": "gpu-5-mig-0",
            "attributes": {"parentIndex": {"int": 5}, "type": {"string": "mig"}},
        }
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _shared_node(api: ApiServer) -> None:
    """n1: a MIG pod, two DRA pods (a whole GPU, a MIG device), a pod with a NIC's claim only,
    and a pod with no device."""
    api.objects[NODES, None, "n1"] = node()
    api.objects[SLICES, None, "n1-gpus"] = gpu_slice()
    api.objects[CLAIMS, "jobs", "c3"] = claim("c3", "gpu-3")
    api.objects[CLAIMS, "jobs", "c5"] = claim("c5", "gpu-5-mig-0")
    api.objects[CLAIMS, "jobs", "nic"] = claim("nic", "eth1", driver="rdma.example.com")
    api.objects[PODS, "jobs", "mig"] = mig_pod("mig")
    api.objects[PODS, "jobs", "dra"] = dra_pod("dra", "c3")
    api.objects[PODS, "jobs", "dra-mig"] = dra_pod("dra-mig", "c5")
    api.objects[PODS, "jobs", "nic"] = dra_pod("nic", "nic")
    api.objects[PODS, "jobs", "web"] = pod("web")


async def test_mig_and_dra_pods_are_gpu_pods_with_their_gpu_from_the_claim(
    api: ApiServer,
) -> None:
    _shared_node(api)
    cluster = kube(api)
    assert isinstance(cluster.workload, Drain)
    use = await call(cluster.workload.use.gpu_use, "n1")
    assert sorted(use.uses, key=lambda u: u.pod) == [
        GpuUse(namespace="jobs", pod="dra", container="c", gpu=3, via=GpuClaim.DRA),
        GpuUse(
            namespace="jobs",
            pod="dra-mig",
            container="c",
            gpu=5,
            mig="gpu-5-mig-0",
            via=GpuClaim.DRA,
        ),
        GpuUse(namespace="jobs", pod="mig", container="c", via=GpuClaim.MIG),
    ]
    assert sorted(u.pod for u in use.on_gpu(3)) == ["dra", "mig"]  # the MIG pod's: unknown
    assert sorted(await call(cluster.workload.gpu_pods, "n1")) == [
        "uid-dra",
        "uid-dra-mig",
        "uid-mig",
    ]


async def test_a_claim_that_cannot_be_read_counts_as_a_gpu_use(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "dra"] = dra_pod("dra", "missing")
    cluster = kube(api)
    assert isinstance(cluster.workload, Drain)
    use = await call(cluster.workload.use.gpu_use, "n1")
    assert use.uses == [GpuUse(namespace="jobs", pod="dra", container="c", via=GpuClaim.DRA)]
    assert use.busy() and use.on_gpu(0) == use.uses


async def test_kill_job_deletes_the_mig_and_dra_pods(api: ApiServer) -> None:
    _shared_node(api)
    cluster = kube(api)
    await call(cluster.control.kill_gpu_pods, "n1", "key-1")
    left = {n for n in ("mig", "dra", "dra-mig", "nic", "web") if (PODS, "jobs", n) in api.objects}
    assert left == {"nic", "web"}


async def test_an_active_check_sees_a_node_of_mig_or_dra_pods_as_busy_on_the_api(
    api: ApiServer, time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    for name in ("mig-node", "dra-node", "idle-node"):
        api.objects[NODES, None, name] = node(name)
    api.objects[SLICES, None, "dra-node-gpus"] = gpu_slice("dra-node")
    api.objects[CLAIMS, "jobs", "c3"] = claim("c3", "gpu-3")
    api.objects[PODS, "jobs", "mig"] = mig_pod("mig", node_name="mig-node")
    api.objects[PODS, "jobs", "dra"] = dra_pod("dra", "c3", node_name="dra-node")
    cluster = kube(api)
    acts = ActiveCheckActivities(
        time_env.client, cluster.marks, cluster.workload, shipped_runbooks, new_seal()
    )
    names = ["mig-node", "dra-node", "idle-node"]
    loads = await ActivityEnvironment().run(acts.node_workloads, NodeNames(nodes=names))
    assert {n: w.gpu_pods for n, w in loads.nodes.items()} == {
        "mig-node": 1,
        "dra-node": 1,
        "idle-node": 0,
    }
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    due = [DueNode(name=n, last_checked=two_days_ago, stale=False) for n in names]
    planned = plan_round(due, loads)
    assert (planned.idle, planned.waiting) == (["idle-node"], ["mig-node", "dra-node"])


async def test_an_active_check_never_cordons_or_load_tests_a_node_of_mig_or_dra_pods(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=3, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    on_mig, on_dra, shared = sorted(fleet.nodes)
    for node_name, layout in ((on_mig, "mig"), (on_dra, "dra"), (shared, "shared")):
        fleet.place(node_name, layout)
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    for node_name in fleet.nodes:
        _mark(fleet, node_name, _check(two_days_ago))  # due, were they idle
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())
    assert summary.plan.waiting == [on_mig, on_dra, shared]
    assert _results(summary) == {}
    assert fleet.actions == []  # no cordon, no drain
    for node_name in fleet.nodes:  # no diagnose: the last check is still two days old
        condition = fleet.nodes[node_name].conditions[GPU_ACTIVE_CHECK]
        assert condition.last_heartbeat_time == two_days_ago


def test_the_twin_reports_which_pod_uses_which_gpu() -> None:
    fleet = SimFleet(nodes=3, gpus_per_node=8)
    shared, on_mig, on_dra = sorted(fleet.nodes)
    fleet.place(shared, "shared")
    fleet.place(on_mig, "mig")
    fleet.place(on_dra, "dra")
    workload = fleet.cluster.workload
    assert workload is not None
    use: NodeGpuUse = workload.gpu_use(shared)  # type: ignore[attr-defined]
    assert len(use.uses) == 8 and [u.pod for u in use.on_gpu(3)] == [f"infer-{shared}-3"]
    mig_use: NodeGpuUse = workload.gpu_use(on_mig)  # type: ignore[attr-defined]
    assert [(u.mig, u.via) for u in mig_use.on_gpu(1)] == [
        ("GPU-I:02", GpuClaim.MIG),
        ("GPU-I:03", GpuClaim.MIG),
    ]
    dra_use: NodeGpuUse = workload.gpu_use(on_dra)  # type: ignore[attr-defined]
    assert {u.via for u in dra_use.uses} == {GpuClaim.DRA} and len(workload.gpu_pods(on_dra)) == 8
