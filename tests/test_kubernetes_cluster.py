"""Contract tests: the real kubernetes client over real HTTP against an API emulator (kmock),
checking the requests remedy sends and what it does with the answers that matter."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import kmock
import pytest
from kmock import Response
from kubernetes import client as k8s

from adapters.kubernetes.admission import (
    ADMISSION_REJECTED,
    ADMISSION_TAINT,
    GPU_SERIALS,
    VALIDATED_LABEL,
)
from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.control import CORDONED_BY, TAINT
from adapters.kubernetes.drain import CHECKPOINT_REQUESTED, CHECKPOINTED
from remedy.cluster import Cluster, CordonOwner
from remedy.conditions import NodeCondition
from remedy.errors import ActionRefused, DrainBlocked, NodeGone, PermissionDenied, TransientError
from remedy.fleet import NodeStatus, OpenWork, status_of
from remedy.models import CordonState

T = TypeVar("T")
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
OWNER = CordonOwner(workflow_id="node-remediation/n1", reason="Xid 79 on GPU 3")
NODES = kmock.resource("v1/nodes")
PODS = kmock.resource("v1/pods")


def kube(mock: kmock.KubernetesEmulator, **options: Any) -> Cluster:
    """The Kubernetes seams on the emulator, quick to retry and give up; ``options`` override."""
    mock.resources["v1/pods"] = {}  # listable even once the last pod is gone
    config = k8s.Configuration()
    config.host = str(mock.url).rstrip("/")
    quick: dict[str, Any] = {"clock": lambda: NOW, "eviction_retry_s": 0.01, "drain_timeout_s": 2.0}
    return kubernetes_cluster(k8s.ApiClient(config), **(quick | options))


@pytest.fixture
def cluster(kmock: kmock.KubernetesEmulator) -> Cluster:
    return kube(kmock)


def node(
    name: str = "n1",
    *,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "resourceVersion": "41",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(
    name: str,
    *,
    node_name: str = "n1",
    owner: str | None = "ReplicaSet",
    gpus: int = 0,
    phase: str = "Running",
    mirror: bool = False,
) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "jobs",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": owner, "name": "o", "apiVersion": "v1", "uid": "x"}]
            if owner
            else [],
            "annotations": {"kubernetes.io/config.mirror": "x"} if mirror else {},
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "i", "resources": resources}],
        },
        "status": {"phase": phase},
    }


async def call(fn: Callable[..., T], *args: Any) -> T:
    # The kubernetes client is synchronous; the emulator serves on this event loop.
    return await asyncio.to_thread(fn, *args)


def sent(mock: kmock.KubernetesEmulator, method: str, path: str) -> list[Any]:
    return [r for r in mock if r.method.value == method and r.url.path == path]


async def test_cordon_patches_unschedulable_taint_and_ownership(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(taints=[{"key": "other", "effect": "NoExecute"}])
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.CORDONED
    [patch] = sent(kmock, "PATCH", "/api/v1/nodes/n1")
    assert patch.headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert patch.data["spec"] == {
        "unschedulable": True,
        "taints": [{"key": "other", "effect": "NoExecute"}, TAINT],
    }
    assert patch.data["metadata"]["resourceVersion"] == "41"  # optimistic concurrency
    assert patch.data["metadata"]["annotations"][CORDONED_BY] == "node-remediation/n1"
    [event] = sent(kmock, "POST", "/api/v1/namespaces/default/events")
    assert event.data["involvedObject"] == {"kind": "Node", "name": "n1", "apiVersion": "v1"}
    assert event.data["reason"] == "RemedyCordoned"


async def test_cordon_by_someone_else_is_reported_and_never_undone(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(unschedulable=True)
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.BY_OTHER
    assert await call(cluster.control.restore, "n1") is False
    assert sent(kmock, "PATCH", "/api/v1/nodes/n1") == []


async def test_restore_removes_only_what_remedy_added(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(
        unschedulable=True,
        annotations={CORDONED_BY: "wf", "team": "keep"},
        taints=[{"key": "other", "effect": "NoExecute"}, TAINT],
    )
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.ALREADY_OURS
    assert await call(cluster.control.restore, "n1") is True
    [patch] = sent(kmock, "PATCH", "/api/v1/nodes/n1")
    assert patch.data["spec"] == {
        "unschedulable": False,
        "taints": [{"key": "other", "effect": "NoExecute"}],
    }
    assert patch.data["metadata"]["annotations"][CORDONED_BY] is None  # deleted by the patch
    assert "team" not in patch.data["metadata"]["annotations"]


async def test_opted_out_node_is_refused(kmock: kmock.KubernetesEmulator, cluster: Cluster) -> None:
    kmock.objects[NODES, None, "n1"] = node(labels={"remedy.io/managed": "false"})
    with pytest.raises(ActionRefused, match="opted out"):
        await call(cluster.control.cordon, "n1", OWNER)
    assert sent(kmock, "PATCH", "/api/v1/nodes/n1") == []


async def test_dry_run_changes_nothing_and_says_what_it_would_do(
    kmock: kmock.KubernetesEmulator,
) -> None:
    """Every change to the cluster passes one gate: in dry run nothing is sent, the only
    Events say "would …", and no answer claims an effect (a cordon that did not happen is not
    "cordoned", so the ladder will not "restore" it either)."""
    cluster = kube(kmock, dry_run=True, replacer="plain")
    kmock.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm": "true"})
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    answers = [
        await call(cluster.control.cordon, "n1", OWNER),
        await call(cluster.control.drain, "n1", lambda left: None, "key-1"),
        await call(cluster.control.kill_gpu_pods, "n1", "key-2"),
        await call(cluster.gpus.release_gpus, "n1"),
        await call(cluster.admission.hold_for_admission, "n1"),
        await call(cluster.admission.admit, "n1", ["SN1"]),
        await call(cluster.admission.reject, "n1", "failed twice"),
        await call(cluster.replacer.replace, "n1", ""),
    ]
    assert answers[0] is CordonState.WOULD_CORDON
    assert all(a.startswith("dry run: would") for a in answers[1:4] + answers[-1:])
    writes = [r for r in kmock if r.method.value in ("PATCH", "DELETE")]
    evictions = [r for r in kmock if r.url.path.endswith("/eviction")]
    assert writes == [] and evictions == []
    events = [r.data for r in sent(kmock, "POST", "/api/v1/namespaces/default/events")]
    assert {e["reason"] for e in events} == {"RemedyDryRun"}
    assert all(e["message"].startswith("would ") for e in events) and len(events) == 8


async def test_conflict_rereads_and_retries(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    kmock["patch /api/v1/nodes/n1"][:1] << 409
    # After a 409 remedy reads the node again. (The emulator stores the refused patch anyway,
    # so the second read finds remedy's own cordon and takes it as ours, without a 2nd patch.)
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.ALREADY_OURS
    assert len(sent(kmock, "GET", "/api/v1/nodes/n1")) == 2
    assert len(sent(kmock, "PATCH", "/api/v1/nodes/n1")) == 1


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [
        (404, NodeGone, False),
        (403, PermissionDenied, False),
        (500, TransientError, True),
        (503, TransientError, True),
    ],
)
async def test_api_failures_map_to_remedy_errors(
    kmock: kmock.KubernetesEmulator,
    cluster: Cluster,
    status: int,
    error: type[Exception],
    retryable: bool,
) -> None:
    kmock["get /api/v1/nodes/n1"] << status
    with pytest.raises(error) as caught:
        await call(cluster.control.cordon, "n1", OWNER)
    assert caught.value.permanent is not retryable  # type: ignore[attr-defined]
    if status == 403:
        assert "RBAC 'get' on nodes/n1" in str(caught.value)


async def test_conditions_patch_node_status_with_only_remedys_types(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    condition = NodeCondition(
        type="GpuProblem",
        status="True",
        reason="Xid79",
        message="GPU 3 fell off the bus",
        last_heartbeat_time=NOW,
        last_transition_time=NOW,
    )
    await call(cluster.marks.set_conditions, "n1", [condition])
    [patch] = sent(kmock, "PATCH", "/api/v1/nodes/n1/status")
    assert patch.headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert patch.data == {
        "status": {
            "conditions": [
                {
                    "type": "GpuProblem",
                    "status": "True",
                    "reason": "Xid79",
                    "message": "GPU 3 fell off the bus",
                    "lastHeartbeatTime": NOW.isoformat(),
                    "lastTransitionTime": NOW.isoformat(),
                }
            ]
        }
    }


async def test_drain_skips_daemonset_and_mirror_pods_and_retries_a_pdb_refusal(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    for item in (
        pod("train", gpus=8),
        pod("dcgm", owner="DaemonSet"),
        pod("static", owner=None, mirror=True),
        pod("done", phase="Succeeded"),
        pod("elsewhere", node_name="n2"),
    ):
        kmock.objects[PODS, "jobs", item["metadata"]["name"]] = item
    eviction = "/api/v1/namespaces/jobs/pods/train/eviction"
    kmock[f"post {eviction}"][:2] << 429  # a PodDisruptionBudget says no, twice

    def evicted(request: Any) -> dict[str, str]:
        del kmock.objects[PODS, "jobs", "train"]  # the API server deletes the pod
        return {"kind": "Status", "status": "Success"}

    kmock[f"post {eviction}"] << evicted
    progress: list[int] = []
    result = await call(cluster.control.drain, "n1", progress.append, "")
    assert result == "evicted 1 pods, left 2 DaemonSet/mirror pods"
    posts = sent(kmock, "POST", eviction)
    assert len(posts) == 3
    assert posts[-1].data["metadata"] == {"name": "train", "namespace": "jobs"}
    assert posts[-1].data["kind"] == "Eviction"
    assert all("eviction" not in r.url.path or "train" in r.url.path for r in kmock)
    assert progress[0] == 1 and progress[-1] == 0


async def test_drain_gives_up_when_the_budget_never_allows(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock, drain_timeout_s=0.2)
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    kmock["post /api/v1/namespaces/jobs/pods/train/eviction"] << 429
    with pytest.raises(DrainBlocked, match="PodDisruptionBudget"):
        await call(cluster.control.drain, "n1", lambda left: None, "")


async def test_kill_job_deletes_only_pods_using_gpus(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    for item in (pod("train", gpus=8), pod("sidecar"), pod("old", gpus=1, phase="Failed")):
        kmock.objects[PODS, "jobs", item["metadata"]["name"]] = item
    assert (
        await call(cluster.control.kill_gpu_pods, "n1", "")
        == "deleted 1 pods using the node's GPUs"
    )
    [delete] = sent(kmock, "DELETE", "/api/v1/namespaces/jobs/pods/train")
    assert delete.params["gracePeriodSeconds"] == "10"


NODECLAIMS = kmock.resource("karpenter.sh/v1/nodeclaims")


async def test_replace_deletes_the_karpenter_nodeclaim_that_owns_the_node(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(labels={"karpenter.sh/nodepool": "gpu"})
    for name, owned in (("claim-a", "n0"), ("claim-b", "n1")):
        kmock.objects[NODECLAIMS, None, name] = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name},
            "status": {"nodeName": owned},
        }
    detail = await call(cluster.replacer.replace, "n1", "")
    assert "claim-b" in detail
    assert [r.url.path for r in kmock if r.method.value == "DELETE"] == [
        "/apis/karpenter.sh/v1/nodeclaims/claim-b"
    ]


async def test_replace_refuses_when_the_provider_is_unknown(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    with pytest.raises(ActionRefused, match="cannot tell how this cluster provisions n1"):
        await call(cluster.replacer.replace, "n1", "")
    assert [r for r in kmock if r.method.value == "DELETE"] == []


async def test_plain_replace_deletes_the_node_after_recording_an_event(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock, replacer="plain")
    kmock.objects[NODES, None, "n1"] = node()
    await call(cluster.replacer.replace, "n1", "")
    writes = [(r.method.value, r.url.path) for r in kmock if r.method.value != "GET"]
    assert writes == [("POST", "/api/v1/namespaces/default/events"), ("DELETE", "/api/v1/nodes/n1")]


async def test_drain_asks_gpu_pods_to_checkpoint_and_waits_for_their_answer(
    kmock: kmock.KubernetesEmulator,
) -> None:
    # A long grace: the job's answer must end the wait, not this.
    cluster = kube(kmock, checkpoint_grace_s=30.0)
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    kmock.objects[PODS, "jobs", "dcgm"] = pod("dcgm", owner="DaemonSet", gpus=1)

    def evicted(request: Any) -> dict[str, str]:
        del kmock.objects[PODS, "jobs", "train"]
        return {"kind": "Status", "status": "Success"}

    kmock["post /api/v1/namespaces/jobs/pods/train/eviction"] << evicted
    drained = asyncio.create_task(call(cluster.control.drain, "n1", lambda left: None, ""))
    for _ in range(200):  # wait for the request, then answer as the training job would
        if sent(kmock, "PATCH", "/api/v1/namespaces/jobs/pods/train"):
            break
        await asyncio.sleep(0.01)
    [ask] = sent(kmock, "PATCH", "/api/v1/namespaces/jobs/pods/train")
    assert ask.data == {"metadata": {"annotations": {CHECKPOINT_REQUESTED: NOW.isoformat()}}}
    assert not sent(kmock, "POST", "/api/v1/namespaces/jobs/pods/train/eviction")  # not yet
    kmock.objects[PODS, "jobs", "train"] = {
        **pod("train", gpus=8),
        "metadata": {
            **pod("train", gpus=8)["metadata"],
            "annotations": {CHECKPOINTED: "step-4200"},
        },
    }
    result = await asyncio.wait_for(drained, timeout=10)
    assert result.startswith("evicted 1 pods")
    assert not sent(kmock, "PATCH", "/api/v1/namespaces/jobs/pods/dcgm")  # DaemonSet: skipped


async def test_checkpoint_grace_runs_out_and_the_drain_goes_on(
    kmock: kmock.KubernetesEmulator,
) -> None:
    cluster = kube(kmock, checkpoint_grace_s=0.2)  # the job never answers
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)

    def evicted(request: Any) -> dict[str, str]:
        del kmock.objects[PODS, "jobs", "train"]
        return {"kind": "Status", "status": "Success"}

    kmock["post /api/v1/namespaces/jobs/pods/train/eviction"] << evicted
    result = await call(cluster.control.drain, "n1", lambda left: None, "")
    assert result.startswith("evicted 1 pods")


async def test_node_boot_reads_boot_id_and_readiness(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    booted = node()
    booted["status"]["nodeInfo"] = {
        "bootID": "b-2",
        "architecture": "amd64",
        "containerRuntimeVersion": "containerd://2.0",
        "kernelVersion": "6.8.0",
        "kubeProxyVersion": "v1.33.0",
        "kubeletVersion": "v1.33.0",
        "machineID": "m",
        "operatingSystem": "linux",
        "osImage": "Ubuntu 24.04",
        "systemUUID": "u",
    }
    kmock.objects[NODES, None, "n1"] = booted
    boot = await call(cluster.control.node_boot, "n1")
    assert (boot.boot_id, boot.ready) == ("b-2", True)


async def test_gpu_reset_stops_the_operators_pods_and_brings_them_back(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    exporter = pod("nvidia-dcgm-exporter-x7", owner="DaemonSet")
    kmock.objects[PODS, "gpu-operator", "nvidia-dcgm-exporter-x7"] = exporter
    kmock.objects[PODS, "jobs", "web"] = pod("web")  # not the GPU operator's: ignored
    released = asyncio.create_task(call(cluster.gpus.release_gpus, "n1"))
    for _ in range(200):  # the operator reacts to the labels by removing its pods
        if sent(kmock, "PATCH", "/api/v1/nodes/n1"):
            break
        await asyncio.sleep(0.01)
    del kmock.objects[PODS, "gpu-operator", "nvidia-dcgm-exporter-x7"]
    assert await asyncio.wait_for(released, timeout=10) == (
        "stopped 1 GPU operator pods for a GPU reset"
    )
    [release] = sent(kmock, "PATCH", "/api/v1/nodes/n1")
    assert release.data["metadata"]["labels"] == {
        "nvidia.com/gpu.deploy.device-plugin": "false",
        "nvidia.com/gpu.deploy.dcgm": "false",
        "nvidia.com/gpu.deploy.dcgm-exporter": "false",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "false",
    }
    await call(cluster.gpus.return_gpus, "n1")
    _, back = sent(kmock, "PATCH", "/api/v1/nodes/n1")
    assert back.data["metadata"]["labels"] == {  # as they were: one "true", the rest unset
        "nvidia.com/gpu.deploy.device-plugin": None,
        "nvidia.com/gpu.deploy.dcgm": None,
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": None,
    }


async def test_a_retried_gpu_release_keeps_the_labels_it_saved_first(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    """The release's answer was lost and it runs again: it must not save its own "false"
    over the original labels, or the operator's pods would never come back."""
    kmock.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    await call(cluster.gpus.release_gpus, "n1")
    await call(cluster.gpus.release_gpus, "n1")  # the retry, on a node already labelled off
    await call(cluster.gpus.return_gpus, "n1")
    labels = kmock.objects[NODES, None, "n1"]["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.dcgm-exporter") == "true"


ACTIONS: dict[str, Callable[[Cluster], object]] = {
    "cordon": lambda c: c.control.cordon("n1", OWNER),
    "restore": lambda c: c.control.restore("n1"),
    "drain": lambda c: c.control.drain("n1", lambda left: None, "key"),
    "kill_job": lambda c: c.control.kill_gpu_pods("n1", "key"),
    "replace": lambda c: c.replacer.replace("n1", ""),
    "release_gpus": lambda c: c.gpus.release_gpus("n1"),
    "node_boot": lambda c: c.control.node_boot("n1"),
    "conditions": lambda c: c.marks.conditions("n1"),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize(
    ("status", "error"),
    [(404, NodeGone), (403, PermissionDenied), (409, TransientError), (500, TransientError)],
)
async def test_every_action_maps_api_failures(
    kmock: kmock.KubernetesEmulator,
    cluster: Cluster,
    action: str,
    status: int,
    error: type[Exception],
) -> None:
    kmock["get /api/v1/nodes/n1"] << status
    with pytest.raises(error):
        await call(ACTIONS[action], cluster)
    writes = [r for r in kmock if r.method.value != "GET"]
    assert writes == []  # nothing is changed on a node remedy could not read


async def test_pod_already_gone_counts_as_evicted_and_deleted(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node()
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    kmock["delete /api/v1/namespaces/jobs/pods/train"] << 404
    # 404 on delete: already gone, counted as done
    assert (
        await call(cluster.control.kill_gpu_pods, "n1", "")
        == "deleted 1 pods using the node's GPUs"
    )
    kmock.objects[PODS, "jobs", "train"] = pod("train", gpus=8)  # (the emulator deleted it)

    def gone(request: Any) -> Response:
        del kmock.objects[PODS, "jobs", "train"]  # deleted by someone else meanwhile
        return Response(status=404, payload={"kind": "Status", "code": 404})

    kmock["post /api/v1/namespaces/jobs/pods/train/eviction"] << gone
    result = await call(cluster.control.drain, "n1", lambda left: None, "")
    assert result.startswith("evicted 1 pods")


async def test_nodes_reports_pool_admission_cordon_and_problem_conditions(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    sick = node(
        "sick",
        unschedulable=True,
        annotations={CORDONED_BY: "node-remediation/sick"},
        labels={"remedy.io/pool": "a100"},
    )
    sick["status"]["conditions"] += [
        {
            "type": "GpuProblem",
            "status": "True",
            "reason": "Xid79",
            "message": "GPU 3 lost",
            "lastHeartbeatTime": NOW.isoformat(),
            "lastTransitionTime": NOW.isoformat(),
        },
        {
            "type": "GpuNetworkProblem",
            "status": "False",
            "reason": "NoGpuNetworkProblem",
            "message": "ok",
            "lastHeartbeatTime": NOW.isoformat(),
            "lastTransitionTime": NOW.isoformat(),
        },
        {  # the agent's readiness: "True" is good news, never a problem
            "type": "RemedyReady",
            "status": "True",
            "reason": "DependenciesPresent",
            "message": "all 6 dependencies present",
        },
    ]
    kmock.objects[NODES, None, "sick"] = sick
    kmock.objects[NODES, None, "new"] = node("new", taints=[ADMISSION_TAINT])
    kmock.objects[NODES, None, "mine"] = node("mine", labels={"remedy.io/managed": "false"})
    facts = {f.name: f for f in await call(cluster.fleet.nodes)}
    assert facts["sick"].pool == "a100" and facts["sick"].cordoned_by_remedy
    assert [c.reason for c in facts["sick"].problems] == ["Xid79"]
    assert facts["new"].awaiting_admission and facts["new"].pool == "default"
    assert not facts["mine"].managed and not facts["mine"].problems
    # The agent's heartbeat is its conditions' lastHeartbeatTime; no condition, no heartbeat.
    assert facts["sick"].last_heartbeat == NOW and facts["sick"].silent_for is not None
    assert facts["mine"].last_heartbeat is None and facts["mine"].silent_for is None
    assert status_of(facts["mine"].model_copy(update={"managed": True}), OpenWork()) is (
        NodeStatus.UNKNOWN
    )


async def test_admission_taints_then_admits_with_label_serials_and_no_taint(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(taints=[{"key": "other", "effect": "NoExecute"}])
    await call(cluster.admission.hold_for_admission, "n1")
    held = kmock.objects[NODES, None, "n1"]
    assert [t["key"] for t in held["spec"]["taints"]] == ["other", ADMISSION_TAINT["key"]]
    await call(cluster.admission.hold_for_admission, "n1")  # idempotent: no second patch
    assert len(sent(kmock, "PATCH", "/api/v1/nodes/n1")) == 1
    await call(cluster.admission.admit, "n1", ["SN1", "SN2"])
    admitted = kmock.objects[NODES, None, "n1"]
    assert [t["key"] for t in admitted["spec"]["taints"]] == ["other"]
    assert admitted["metadata"]["labels"][VALIDATED_LABEL] == "true"
    assert admitted["metadata"]["annotations"][GPU_SERIALS] == "SN1,SN2"


async def test_reject_keeps_the_taint_and_records_why(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(taints=[ADMISSION_TAINT])
    await call(cluster.admission.reject, "n1", "blocklisted: GPU SN1")
    rejected = kmock.objects[NODES, None, "n1"]
    assert rejected["metadata"]["annotations"][ADMISSION_REJECTED] == "blocklisted: GPU SN1"
    assert [t["key"] for t in rejected["spec"]["taints"]] == [ADMISSION_TAINT["key"]]
    facts = {f.name: f for f in await call(cluster.fleet.nodes)}
    assert facts["n1"].rejected == "blocklisted: GPU SN1"


async def test_an_opted_out_node_is_never_held_for_admission(
    kmock: kmock.KubernetesEmulator, cluster: Cluster
) -> None:
    kmock.objects[NODES, None, "n1"] = node(labels={"remedy.io/managed": "false"})
    with pytest.raises(ActionRefused, match="opted out"):
        await call(cluster.admission.hold_for_admission, "n1")
    assert sent(kmock, "PATCH", "/api/v1/nodes/n1") == []
