"""Contract tests: the real kubernetes client over real HTTP against an API emulator (api),
checking the requests remedy sends and what it does with the answers that matter: cordon,
restore, conditions, drain and kill job."""

from __future__ import annotations

import asyncio

import pytest

from adapters.kubernetes.control import CORDONED_BY, TAINT
from kubeapi import ApiServer
from remedy.core.errors import (
    ActionRefused,
    DrainBlocked,
    NodeGone,
    PermissionDenied,
    TransientError,
)
from remedy.core.models import CordonState
from remedy.scan.cluster import Cluster
from tests.kube import (
    DAEMONSETS,
    NODES,
    NOW,
    OWNER,
    PDBS,
    PODS,
    budget,
    call,
    daemonset,
    gpu_problem,
    kube,
    node,
    pod,
    sent,
)

TRAIN = {"app": "train"}


@pytest.fixture
def cluster(api: ApiServer) -> Cluster:
    return kube(api)


async def test_cordon_patches_unschedulable_taint_and_ownership(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(taints=[{"key": "other", "effect": "NoExecute"}])
    version = api.objects[NODES, None, "n1"]["metadata"]["resourceVersion"]
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.CORDONED
    [patch] = sent(api, "PATCH", "/api/v1/nodes/n1")
    assert patch.headers["Content-Type"] == "application/strategic-merge-patch+json"
    assert patch.data["spec"] == {
        "unschedulable": True,
        "taints": [{"key": "other", "effect": "NoExecute"}, TAINT],
    }
    assert patch.data["metadata"]["resourceVersion"] == version  # optimistic concurrency
    assert patch.data["metadata"]["annotations"][CORDONED_BY] == "node-remediation/n1"
    [event] = sent(api, "POST", "/api/v1/namespaces/default/events")
    uid = api.objects[NODES, None, "n1"]["metadata"]["uid"]  # `kubectl describe` selects by it
    assert event.data["involvedObject"] == {
        "kind": "Node",
        "name": "n1",
        "apiVersion": "v1",
        "uid": uid,
    }
    assert event.data["reason"] == "RemedyCordoned"


async def test_cordon_by_someone_else_is_reported_and_never_undone(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node(unschedulable=True)
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.BY_OTHER
    assert await call(cluster.control.restore, "n1") is False
    assert sent(api, "PATCH", "/api/v1/nodes/n1") == []


async def test_restore_removes_only_what_remedy_added(api: ApiServer, cluster: Cluster) -> None:
    api.objects[NODES, None, "n1"] = node(
        unschedulable=True,
        annotations={CORDONED_BY: "wf", "team": "keep"},
        taints=[{"key": "other", "effect": "NoExecute"}, TAINT],
    )
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.ALREADY_OURS
    assert await call(cluster.control.restore, "n1") is True
    [patch] = sent(api, "PATCH", "/api/v1/nodes/n1")
    assert patch.data["spec"] == {
        "unschedulable": False,
        "taints": [{"key": "other", "effect": "NoExecute"}],
    }
    assert patch.data["metadata"]["annotations"][CORDONED_BY] is None  # deleted by the patch
    assert "team" not in patch.data["metadata"]["annotations"]


async def test_opted_out_node_is_refused(api: ApiServer, cluster: Cluster) -> None:
    api.objects[NODES, None, "n1"] = node(labels={"remedy.io/managed": "false"})
    with pytest.raises(ActionRefused, match="opted out"):
        await call(cluster.control.cordon, "n1", OWNER)
    assert sent(api, "PATCH", "/api/v1/nodes/n1") == []


async def test_dry_run_changes_nothing_and_says_what_it_would_do(
    api: ApiServer,
) -> None:
    """Every change to the cluster passes one gate: in dry run nothing is sent, the only
    Events say "would …", and no answer claims an effect (a cordon that did not happen is not
    "cordoned", so the ladder will not "restore" it either)."""
    cluster = kube(api, dry_run=True, replacer="plain")
    api.objects[NODES, None, "n1"] = node(labels={"nvidia.com/gpu.deploy.dcgm": "true"})
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)
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
    writes = [r for r in api.requests if r.method in ("PATCH", "DELETE")]
    evictions = [r for r in api.requests if r.path.endswith("/eviction")]
    assert writes == [] and evictions == []
    events = [r.data for r in sent(api, "POST", "/api/v1/namespaces/default/events")]
    assert {e["reason"] for e in events} == {"RemedyDryRun"}
    assert all(e["message"].startswith("would ") for e in events) and len(events) == 8


async def test_conflict_rereads_and_retries(api: ApiServer, cluster: Cluster) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.fail("patch /api/v1/nodes/n1", 409)
    # After a 409 remedy reads the node again and patches the version it read then.
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.CORDONED
    assert len(sent(api, "GET", "/api/v1/nodes/n1")) == 2
    assert len(sent(api, "PATCH", "/api/v1/nodes/n1")) == 2
    assert api.objects[NODES, None, "n1"]["spec"]["unschedulable"] is True


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
    api: ApiServer,
    cluster: Cluster,
    status: int,
    error: type[Exception],
    retryable: bool,
) -> None:
    api.fail("get /api/v1/nodes/n1", status)
    with pytest.raises(error) as caught:
        await call(cluster.control.cordon, "n1", OWNER)
    assert caught.value.permanent is not retryable  # type: ignore[attr-defined]
    if status == 403:
        assert "RBAC 'get' on nodes/n1" in str(caught.value)


async def test_conditions_patch_node_status_with_only_remedys_types(
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node()
    await call(cluster.marks.set_conditions, "n1", [gpu_problem()])
    [patch] = sent(api, "PATCH", "/api/v1/nodes/n1/status")
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
    api: ApiServer, cluster: Cluster
) -> None:
    api.objects[NODES, None, "n1"] = node()
    for item in (
        pod("train", gpus=8, labels=TRAIN),
        pod("dcgm", owner="DaemonSet"),
        pod("static", owner=None, mirror=True),
        pod("done", phase="Succeeded"),
        pod("elsewhere", node_name="n2"),
    ):
        api.objects[PODS, "jobs", item["metadata"]["name"]] = item
    api.objects[PDBS, "jobs", "train"] = budget("train", min_available=1)
    api.objects[DAEMONSETS, "jobs", "o"] = daemonset()  # dcgm's: it exists, so its pod stays
    eviction = "/api/v1/namespaces/jobs/pods/train/eviction"

    async def replica_ready_after_two_refusals() -> None:
        while len(sent(api, "POST", eviction)) < 2:
            await asyncio.sleep(0.005)
        api.objects[PODS, "jobs", "train-b"] = pod("train-b", node_name="n2", labels=TRAIN)

    progress: list[int] = []
    replica = asyncio.create_task(replica_ready_after_two_refusals())
    result = await call(cluster.control.drain, "n1", progress.append, "")
    await replica
    assert result == "evicted 1 pods, left 2 DaemonSet/mirror pods"
    posts = sent(api, "POST", eviction)
    assert [p.status for p in posts[:2]] == [429, 429] and posts[-1].status == 201
    assert ("v1/pods", "jobs", "train") not in api.objects
    assert posts[-1].data["metadata"] == {"name": "train", "namespace": "jobs"}
    assert posts[-1].data["kind"] == "Eviction"
    assert all("eviction" not in r.path or "train" in r.path for r in api.requests)
    assert progress[0] == 1 and progress[-1] == 0


async def test_drain_gives_up_when_the_budget_never_allows(
    api: ApiServer,
) -> None:
    cluster = kube(api, drain_timeout_s=0.2)
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8, labels=TRAIN)
    api.objects[PDBS, "jobs", "train"] = budget("train", min_available=1)
    with pytest.raises(DrainBlocked, match="PodDisruptionBudget"):
        await call(cluster.control.drain, "n1", lambda left: None, "")


async def test_kill_job_deletes_only_pods_using_gpus(api: ApiServer, cluster: Cluster) -> None:
    api.objects[NODES, None, "n1"] = node()
    for item in (pod("train", gpus=8), pod("sidecar"), pod("old", gpus=1, phase="Failed")):
        api.objects[PODS, "jobs", item["metadata"]["name"]] = item
    assert (
        await call(cluster.control.kill_gpu_pods, "n1", "")
        == "deleted 1 pods using the node's GPUs"
    )
    [delete] = sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/train")
    assert delete.query["gracePeriodSeconds"] == "10"
