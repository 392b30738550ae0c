"""Contract tests over the API emulator (api), continued: replacement, boot ids, the GPU
operator's hand-off for a reset, the fleet view and admission."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from adapters.kubernetes.admission import (
    ADMISSION_REJECTED,
    ADMISSION_TAINT,
    GPU_SERIALS,
    VALIDATED_LABEL,
)
from adapters.kubernetes.control import CORDONED_BY
from adapters.kubernetes.drain import CHECKPOINT_REQUESTED, CHECKPOINTED
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused, NodeGone, PermissionDenied, TransientError
from remedy.scan.cluster import Cluster
from remedy.scan.fleet import NodeStatus, OpenWork, status_of
from tests.kube import (
    DAEMONSETS,
    NODECLAIMS,
    NODES,
    NOW,
    OWNER,
    PODS,
    call,
    daemonset,
    kube,
    node,
    pod,
    sent,
)


@pytest.fixture
def cluster(api: ApiServer) -> Cluster:
    return kube(api)


async def test_replace_deletes_the_karpenter_nodeclaim_that_owns_the_node(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(labels={"karpenter.sh/nodepool": "gpu"})
    for name, owned in (("claim-a", "n0"), ("claim-b", "n1")):
        api.objects[NODECLAIMS, None, name] = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name},
            "status": {"nodeName": owned},
        }
    detail = await call(cluster.replacer.replace, "n1", "")
    assert "claim-b" in detail
    assert [r.path for r in api.requests if r.method == "DELETE"] == [
        "/apis/karpenter.sh/v1/nodeclaims/claim-b"
    ]


async def test_replace_refuses_when_the_provider_is_unknown(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node()
    with pytest.raises(ActionRefused, match="cannot tell how this cluster provisions n1"):
        await call(cluster.replacer.replace, "n1", "")
    assert [r for r in api.requests if r.method == "DELETE"] == []


async def test_plain_replace_deletes_the_node_after_recording_an_event(
    api: ApiServer,
) -> None:
    cluster = kube(api, replacer="plain")
    api.objects[NODES, None, "n1"] = node()
    await call(cluster.replacer.replace, "n1", "")
    writes = [(r.method, r.path) for r in api.requests if r.method != "GET"]
    assert writes == [("POST", "/api/v1/namespaces/default/events"), ("DELETE", "/api/v1/nodes/n1")]


async def test_drain_asks_gpu_pods_to_checkpoint_and_waits_for_their_answer(
    api: ApiServer,
) -> None:
    # A long grace: the job's answer must end the wait, not this.
    cluster = kube(api, checkpoint_grace_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    api.objects[PODS, "jobs", "dcgm"] = pod("dcgm", owner="DaemonSet", gpus=1)
    api.objects[DAEMONSETS, "jobs", "o"] = daemonset()
    drained = asyncio.create_task(call(cluster.control.drain, "n1", lambda left: None, ""))
    for _ in range(200):  # wait for the request, then answer as the training job would
        if sent(api, "PATCH", "/api/v1/namespaces/jobs/pods/train"):
            break
        await asyncio.sleep(0.01)
    [ask] = sent(api, "PATCH", "/api/v1/namespaces/jobs/pods/train")
    assert ask.data == {"metadata": {"annotations": {CHECKPOINT_REQUESTED: NOW.isoformat()}}}
    assert not sent(api, "POST", "/api/v1/namespaces/jobs/pods/train/eviction")  # not yet
    api.objects[PODS, "jobs", "train"] = {
        **pod("train", gpus=8),
        "metadata": {
            **pod("train", gpus=8)["metadata"],
            "annotations": {CHECKPOINTED: "step-4200"},
        },
    }
    result = await asyncio.wait_for(drained, timeout=10)
    assert result.startswith("evicted 1 pods")
    assert not sent(api, "PATCH", "/api/v1/namespaces/jobs/pods/dcgm")  # DaemonSet: skipped


async def test_checkpoint_grace_runs_out_and_the_drain_goes_on(
    api: ApiServer,
) -> None:
    cluster = kube(api, checkpoint_grace_s=0.2)  # the job never answers
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    result = await call(cluster.control.drain, "n1", lambda left: None, "")
    assert result.startswith("evicted 1 pods")


async def test_node_boot_reads_boot_id_and_readiness(api: ApiServer, cluster: Cluster) -> None:
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
    api.objects[NODES, None, "n1"] = booted
    boot = await call(cluster.control.node_boot, "n1")
    assert (boot.boot_id, boot.ready) == ("b-2", True)


async def test_gpu_reset_stops_the_operators_pods_and_brings_them_back(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    exporter = pod(
        "nvidia-dcgm-exporter-x7", owner="DaemonSet", labels={"app": "nvidia-dcgm-exporter"}
    )
    api.objects[PODS, "gpu-operator", "nvidia-dcgm-exporter-x7"] = exporter
    api.objects[PODS, "jobs", "web"] = pod("web")  # not the GPU operator's: ignored
    lists: list[int] = []

    def operator_reacts() -> None:  # to the labels, by removing its pods: seen on 2nd look
        lists.append(1)
        if len(lists) == 2:
            del api.objects[PODS, "gpu-operator", "nvidia-dcgm-exporter-x7"]

    api.before("get /api/v1/pods", operator_reacts, times=2)
    assert await call(cluster.gpus.release_gpus, "n1") == (
        "stopped 1 GPU operator pods for a GPU reset"
    )
    [release] = sent(api, "PATCH", "/api/v1/nodes/n1")
    # Only what runs gets remedy's mark; the operands not deployed here stay unset.
    assert release.data["metadata"]["labels"] == {
        "nvidia.com/gpu.deploy.dcgm-exporter": "paused-for-remedy"
    }
    await call(cluster.gpus.return_gpus, "n1")
    _, back = sent(api, "PATCH", "/api/v1/nodes/n1")
    assert back.data["metadata"]["labels"] == {"nvidia.com/gpu.deploy.dcgm-exporter": "true"}
    assert api.objects[NODES, None, "n1"]["metadata"]["labels"] == {
        "nvidia.com/gpu.deploy.dcgm-exporter": "true"
    }


async def test_a_retried_gpu_release_keeps_the_labels_it_saved_first(
    api: ApiServer, cluster: Cluster
) -> None:
    """The release's answer was lost and it runs again: it must not save its own "false"
    over the original labels, or the operator's pods would never come back."""
    api.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    await call(cluster.gpus.release_gpus, "n1")
    await call(cluster.gpus.release_gpus, "n1")  # the retry, on a node already labelled off
    await call(cluster.gpus.return_gpus, "n1")
    labels = api.objects[NODES, None, "n1"]["metadata"]["labels"]
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
    api: ApiServer,
    cluster: Cluster,
    action: str,
    status: int,
    error: type[Exception],
) -> None:
    api.fail("get /api/v1/nodes/n1", status)
    with pytest.raises(error):
        await call(ACTIONS[action], cluster)
    writes = [r for r in api.requests if r.method != "GET"]
    assert writes == []  # nothing is changed on a node remedy could not read


async def test_pod_already_gone_counts_as_evicted_and_deleted(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
    api.fail("delete /api/v1/namespaces/jobs/pods/train", 404)
    # 404 on delete: already gone, counted as done
    assert (
        await call(cluster.control.kill_gpu_pods, "n1", "")
        == "deleted 1 pods using the node's GPUs"
    )
    # Deleted by someone else between remedy's list and its eviction: 404, counted as done.
    api.before(
        "post /api/v1/namespaces/jobs/pods/train/eviction",
        lambda: api.objects.__delitem__((PODS, "jobs", "train")),
    )
    result = await call(cluster.control.drain, "n1", lambda left: None, "")
    assert result.startswith("evicted 1 pods")


async def test_nodes_reports_pool_admission_cordon_and_problem_conditions(
    api: ApiServer, cluster: Cluster
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
    api.objects[NODES, None, "sick"] = sick
    api.objects[NODES, None, "new"] = node("new", taints=[ADMISSION_TAINT])
    api.objects[NODES, None, "mine"] = node("mine", labels={"remedy.io/managed": "false"})
    facts = {f.name: f for f in await call(cluster.fleet.nodes)}
    assert facts["sick"].pool == "a100" and facts["sick"].cordoned_by_remedy
    assert [c.reason for c in facts["sick"].problems] == ["Xid79"]
    assert facts["new"].awaiting_admission and facts["new"].pool == "default"
    assert not facts["mine"].managed and not facts["mine"].problems
    # The agent's heartbeat is its conditions' lastHeartbeatTime; no condition, no heartbeat.
    # How long it has been silent is the scan's to judge, on its own clock (remedy.scan.liveness).
    assert facts["sick"].last_heartbeat == NOW and facts["sick"].silent_for is None
    assert facts["mine"].last_heartbeat is None and facts["mine"].silent_for is None
    assert status_of(facts["mine"].model_copy(update={"managed": True}), OpenWork()) is (
        NodeStatus.UNKNOWN
    )


async def test_admission_taints_then_admits_with_label_serials_and_no_taint(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(taints=[{"key": "other", "effect": "NoExecute"}])
    await call(cluster.admission.hold_for_admission, "n1")
    held = api.objects[NODES, None, "n1"]
    assert [t["key"] for t in held["spec"]["taints"]] == ["other", ADMISSION_TAINT["key"]]
    await call(cluster.admission.hold_for_admission, "n1")  # idempotent: no second patch
    assert len(sent(api, "PATCH", "/api/v1/nodes/n1")) == 1
    await call(cluster.admission.admit, "n1", ["SN1", "SN2"])
    admitted = api.objects[NODES, None, "n1"]
    assert [t["key"] for t in admitted["spec"]["taints"]] == ["other"]
    assert admitted["metadata"]["labels"][VALIDATED_LABEL] == "true"
    assert admitted["metadata"]["annotations"][GPU_SERIALS] == "SN1,SN2"


async def test_reject_keeps_the_taint_and_records_why(api: ApiServer, cluster: Cluster) -> None:
    api.objects[NODES, None, "n1"] = node(taints=[ADMISSION_TAINT])
    await call(cluster.admission.reject, "n1", "blocklisted: GPU SN1")
    rejected = api.objects[NODES, None, "n1"]
    assert rejected["metadata"]["annotations"][ADMISSION_REJECTED] == "blocklisted: GPU SN1"
    assert [t["key"] for t in rejected["spec"]["taints"]] == [ADMISSION_TAINT["key"]]
    facts = {f.name: f for f in await call(cluster.fleet.nodes)}
    assert facts["n1"].rejected == "blocklisted: GPU SN1"


async def test_an_opted_out_node_is_never_held_for_admission(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(labels={"remedy.io/managed": "false"})
    with pytest.raises(ActionRefused, match="opted out"):
        await call(cluster.admission.hold_for_admission, "n1")
    assert sent(api, "PATCH", "/api/v1/nodes/n1") == []
