"""What remedy writes on a Node, against the strict API server: its cordon (a taint kept unique,
Karpenter's do-not-disrupt), its restore (only its own marks, never someone else's cordon), and
the GPU operator's labels it pauses for a GPU reset (only its own mark, found again by value)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from adapters.kubernetes.control import CORDONED_BY, TAINT
from kubeapi import ApiServer
from remedy.core.models import CordonState
from remedy.scan.cluster import Cluster
from tests.kube import NODES, OWNER, PODS, call, kube, node, pod, sent

# Names others read, pinned here as they see them: Karpenter's annotation, remedy's label value.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
PAUSED = "paused-for-remedy"
DEPLOY = "nvidia.com/gpu.deploy"
# The GPU operator's pods on n1, as its DaemonSets label them, by the deploy label selecting them.
OPERATOR_PODS = {
    "nvidia-device-plugin-daemonset-a1": ("nvidia-device-plugin-daemonset", "device-plugin"),
    "nvidia-dcgm-exporter-b2": ("nvidia-dcgm-exporter", "dcgm-exporter"),
    "nvidia-mig-manager-c3": ("nvidia-mig-manager", "mig-manager"),
}


@pytest.fixture
def cluster(api: ApiServer) -> Cluster:
    return kube(api)


def labels_of(api: ApiServer) -> dict[str, str]:
    found: dict[str, str] = api.objects[NODES, None, "n1"]["metadata"].get("labels", {})
    return found


def annotations_of(api: ApiServer) -> dict[str, str]:
    found: dict[str, str] = api.objects[NODES, None, "n1"]["metadata"].get("annotations", {})
    return found


def kubectl(api: ApiServer, change: Any) -> None:
    """Someone else's write to n1 (kubectl, another controller), between remedy's calls."""
    current = api.objects[NODES, None, "n1"]
    change(current)
    api.objects[NODES, None, "n1"] = current


def operator_pod(name: str, app: str, namespace: str = "gpu-operator") -> dict[str, Any]:
    made = pod(name, owner="DaemonSet", labels={"app": app})
    made["metadata"]["namespace"] = namespace
    return made


def daemonset_controller(api: ApiServer) -> None:
    """Like the DaemonSet controller: from the second look at the pods on, each operator pod
    whose deploy label on n1 no longer says "true" is gone."""
    looks: list[int] = []

    def react() -> None:
        looks.append(1)
        if len(looks) < 2:
            return
        labels = labels_of(api)
        for name, (_, operand) in OPERATOR_PODS.items():
            key = (PODS, "gpu-operator", name)
            if labels.get(f"{DEPLOY}.{operand}") != "true" and key in api.objects:
                del api.objects[key]

    api.before("get /api/v1/pods", react, times=1000)


async def test_defect_1_gpu_operator_labels_survive_a_retried_release_and_others_changes(
    api: ApiServer, cluster: Cluster
) -> None:
    """Only the running operands get remedy's mark; a retry finds its mark and keeps it; what
    someone else set meanwhile (or before: the driver manager's own pause) is never undone."""
    api.objects[NODES, None, "n1"] = node(
        labels={
            f"{DEPLOY}.device-plugin": "true",
            f"{DEPLOY}.dcgm": "true",
            f"{DEPLOY}.dcgm-exporter": "true",
            f"{DEPLOY}.gpu-feature-discovery": "paused-for-driver-upgrade",  # the driver manager's
        }
    )
    await call(cluster.gpus.release_gpus, "n1")
    await call(cluster.gpus.release_gpus, "n1")  # the retry: the first answer was lost
    assert labels_of(api) == {
        f"{DEPLOY}.device-plugin": PAUSED,
        f"{DEPLOY}.dcgm": PAUSED,
        f"{DEPLOY}.dcgm-exporter": PAUSED,
        f"{DEPLOY}.gpu-feature-discovery": "paused-for-driver-upgrade",
    }
    # Meanwhile: a person turns the exporter off here, and the driver manager finishes.
    kubectl(
        api,
        lambda n: n["metadata"]["labels"].update(
            {f"{DEPLOY}.dcgm-exporter": "false", f"{DEPLOY}.gpu-feature-discovery": "true"}
        ),
    )
    await call(cluster.gpus.return_gpus, "n1")
    await call(cluster.gpus.return_gpus, "n1")  # a retried return changes nothing more
    assert labels_of(api) == {
        f"{DEPLOY}.device-plugin": "true",
        f"{DEPLOY}.dcgm": "true",
        f"{DEPLOY}.dcgm-exporter": "false",
        f"{DEPLOY}.gpu-feature-discovery": "true",
    }


async def test_defect_11_gpu_operator_pods_found_by_their_labels_mig_manager_included(
    api: ApiServer, cluster: Cluster
) -> None:
    """The operator's pods are found by their ``app`` labels wherever the operator runs: a
    user's own DaemonSet pod named like one is not waited for, and the MIG manager (which
    would otherwise reset the GPUs itself for a MIG change) steps aside too."""
    api.objects[NODES, None, "n1"] = node(
        labels={
            f"{DEPLOY}.device-plugin": "true",
            f"{DEPLOY}.dcgm-exporter": "true",
            f"{DEPLOY}.mig-manager": "true",
            f"{DEPLOY}.dra-driver": "true",  # the DRA kubelet plugin stays (see gpu_operator.py)
        }
    )
    for name, (app, _) in OPERATOR_PODS.items():
        api.objects[PODS, "gpu-operator", name] = operator_pod(name, app)
    # Someone's own exporter: a DaemonSet pod whose name says dcgm-exporter, not the operator's.
    mine = operator_pod("team-dcgm-exporter-z9", "team-exporter", namespace="monitoring")
    api.objects[PODS, "monitoring", "team-dcgm-exporter-z9"] = mine
    daemonset_controller(api)

    said = await call(cluster.gpus.release_gpus, "n1")

    assert said == "stopped 3 GPU operator pods for a GPU reset"
    assert labels_of(api) == {
        f"{DEPLOY}.device-plugin": PAUSED,
        f"{DEPLOY}.dcgm-exporter": PAUSED,
        f"{DEPLOY}.mig-manager": PAUSED,
        f"{DEPLOY}.dra-driver": "true",
    }
    assert (PODS, "monitoring", "team-dcgm-exporter-z9") in api.objects
    lists = [r.query for r in sent(api, "GET", "/api/v1/pods")]
    assert lists and all(
        q["fieldSelector"] == "spec.nodeName=n1" and q["labelSelector"].startswith("app in (")
        for q in lists
    )


async def test_defect_2_cordon_after_kubectl_uncordon_keeps_one_taint(
    api: ApiServer, cluster: Cluster
) -> None:
    """``kubectl uncordon`` clears ``spec.unschedulable`` and leaves remedy's taint: cordoning
    again must not add a second one (the API server refuses duplicate key+effect, 422, on
    every retry)."""
    api.objects[NODES, None, "n1"] = node(taints=[{"key": "other", "effect": "NoExecute"}])
    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.CORDONED
    kubectl(api, lambda n: n["spec"].update(unschedulable=False))  # kubectl uncordon n1

    assert await call(cluster.control.cordon, "n1", OWNER) is CordonState.CORDONED

    current = api.objects[NODES, None, "n1"]
    assert current["spec"]["unschedulable"] is True
    assert current["spec"]["taints"] == [{"key": "other", "effect": "NoExecute"}, TAINT]


async def test_defect_12_karpenter_do_not_disrupt_while_cordoned_and_only_remedys_removed(
    api: ApiServer, cluster: Cluster
) -> None:
    """Karpenter consolidates or replaces a drifted node, cordoned or not, unless the node says
    ``karpenter.sh/do-not-disrupt: "true"``: remedy sets it with its cordon and removes it on
    restore; one set by someone else before stays."""
    api.objects[NODES, None, "n1"] = node(labels={"karpenter.sh/nodepool": "gpu"})
    await call(cluster.control.cordon, "n1", OWNER)
    assert annotations_of(api)[DO_NOT_DISRUPT] == "true"
    assert await call(cluster.control.restore, "n1") is True
    assert DO_NOT_DISRUPT not in annotations_of(api)

    kubectl(api, lambda n: n["metadata"]["annotations"].update({DO_NOT_DISRUPT: "true"}))
    await call(cluster.control.cordon, "n1", OWNER)
    assert await call(cluster.control.restore, "n1") is True
    assert annotations_of(api)[DO_NOT_DISRUPT] == "true"  # theirs: it stays
    assert api.objects[NODES, None, "n1"]["spec"]["unschedulable"] is False


async def test_restore_after_someone_else_cordoned_leaves_their_cordon(
    api: ApiServer, cluster: Cluster
) -> None:
    """remedy cordons; someone runs ``kubectl uncordon`` and ``kubectl cordon`` (the API server
    records them as the writer of ``spec.unschedulable``). remedy's restore removes its own
    marks and leaves their cordon, with an Event saying why."""
    api.objects[NODES, None, "n1"] = node()
    await call(cluster.control.cordon, "n1", OWNER)

    # As `kubectl uncordon` and `kubectl cordon` send them (their field manager included):
    # the API server's managedFields now name kubectl-cordon as the writer of unschedulable.
    core = k8s.CoreV1Api(api.client())
    for cordoned in (False, True):
        core.patch_node("n1", {"spec": {"unschedulable": cordoned}}, field_manager="kubectl-cordon")

    assert await call(cluster.control.restore, "n1") is False

    current = api.objects[NODES, None, "n1"]
    assert current["spec"]["unschedulable"] is True  # theirs
    assert current["spec"].get("taints", []) == []  # remedy's taint went
    assert CORDONED_BY not in annotations_of(api) and DO_NOT_DISRUPT not in annotations_of(api)
    events = [r.data for r in sent(api, "POST", "/api/v1/namespaces/default/events")]
    assert "left the node cordoned" in events[-1]["message"]


async def test_restore_leaves_a_cordon_taken_over_without_remedys_taint(
    api: ApiServer, cluster: Cluster
) -> None:
    """Someone took the node over: removed remedy's taint and kept it cordoned. Without field
    tracking too, that cordon is theirs and stays."""
    api.objects[NODES, None, "n1"] = node()
    await call(cluster.control.cordon, "n1", OWNER)
    kubectl(api, lambda n: n["spec"].update(taints=[]))

    assert await call(cluster.control.restore, "n1") is False

    assert api.objects[NODES, None, "n1"]["spec"]["unschedulable"] is True
    assert CORDONED_BY not in annotations_of(api)
