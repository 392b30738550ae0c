"""Where the emulator was more permissive than kube-apiserver, and is no longer (issue 27):
pods Terminating for their grace period on a Ready node, lists served from one snapshot,
continue tokens that expire with 410, metadata-only lists, and PodDisruptionBudget status that
the Eviction API decides by — which lags, and which a concurrent eviction changes (409)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from kubernetes import client as k8s

from kubeapi import ApiServer
from tests.kube import NODES, PDBS, PODS, budget, core, node, pod, refused, take_disruption

EVICT = "POST /api/v1/namespaces/jobs/pods/{}/eviction"
SECOND = timedelta(seconds=1)


def eviction(name: str) -> k8s.V1Eviction:
    return k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace="jobs"))


def pages(api: ApiServer, **options: Any) -> Any:
    return core(api).list_node(limit=2, _preload_content=False, **options)


def page(answer: Any) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(answer.data)
    return found


def names(listed: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in listed["items"]]


# -- a pod on a Ready node is Terminating until its kubelet stops it ----------------------------


def test_a_pod_that_ignores_sigterm_stays_terminating_for_its_grace_period(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    slow = pod("train")
    slow["spec"]["terminationGracePeriodSeconds"] = 45
    api.objects[PODS, "jobs", "train"] = slow
    api.kubelets.stops["jobs", "train"] = None  # SIGTERM ignored: SIGKILL at the end
    deleted = core(api).delete_namespaced_pod("train", "jobs")
    assert deleted.metadata.deletion_grace_period_seconds == 45
    assert deleted.metadata.deletion_timestamp == api.clock.now() + 45 * SECOND
    api.clock.advance(44)
    assert core(api).read_namespaced_pod("train", "jobs").metadata.deletion_timestamp
    api.clock.advance(1)
    refused(404, core(api).read_namespaced_pod, "train", "jobs")


def test_a_pod_stops_as_soon_as_its_containers_do_and_a_forced_delete_at_once(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    for name in ("quick", "slow", "forced"):
        api.objects[PODS, "jobs", name] = pod(name)
    api.kubelets.stops["jobs", "slow"] = 5.0
    api.kubelets.stops["jobs", "forced"] = None
    assert core(api).delete_namespaced_pod("quick", "jobs").metadata.deletion_timestamp
    assert (PODS, "jobs", "quick") not in api.objects  # its containers stopped at once
    core(api).delete_namespaced_pod("slow", "jobs")
    api.clock.advance(4)
    assert (PODS, "jobs", "slow") in api.objects
    api.clock.advance(1)
    assert (PODS, "jobs", "slow") not in api.objects
    core(api).delete_namespaced_pod("forced", "jobs")
    core(api).delete_namespaced_pod("forced", "jobs", grace_period_seconds=0)
    assert (PODS, "jobs", "forced") not in api.objects


def test_a_shorter_grace_period_brings_the_end_forward(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "train"] = pod("train")
    api.kubelets.stops["jobs", "train"] = None
    core(api).delete_namespaced_pod("train", "jobs")  # 30 s, the default
    again = core(api).delete_namespaced_pod("train", "jobs", grace_period_seconds=10)
    assert again.metadata.deletion_timestamp == api.clock.now() + 10 * SECOND
    later = core(api).delete_namespaced_pod("train", "jobs", grace_period_seconds=60)
    assert later.metadata.deletion_timestamp == again.metadata.deletion_timestamp  # never later


# -- lists: one snapshot, expiring continue tokens, metadata only -------------------------------


def test_every_page_of_a_list_is_served_from_the_first_pages_snapshot(api: ApiServer) -> None:
    for i in range(5):
        api.objects[NODES, None, f"n{i}"] = node(f"n{i}")
    first = page(pages(api))
    del api.objects[NODES, None, "n3"]
    api.objects[NODES, None, "n2a"] = node("n2a")
    token = first["metadata"]["continue"]
    second = page(pages(api, _continue=token))
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    third = page(pages(api, _continue=second["metadata"]["continue"]))
    assert names(first) + names(second) + names(third) == ["n0", "n1", "n2", "n3", "n4"]
    assert "continue" not in third["metadata"]
    fresh = [n.metadata.name for n in core(api).list_node().items]
    assert fresh == ["n0", "n1", "n2", "n2a", "n4"]


def test_a_continue_token_compacted_away_is_410_with_a_token_for_the_rest(
    api: ApiServer,
) -> None:
    for i in range(5):
        api.objects[NODES, None, f"n{i}"] = node(f"n{i}")
    first = page(pages(api))
    api.objects[NODES, None, "n2a"] = node("n2a")
    api.compact()
    body = refused(410, pages, api, _continue=first["metadata"]["continue"])
    assert body["reason"] == "Expired"
    rest = page(pages(api, _continue=body["metadata"]["continue"]))  # inconsistent, as said
    assert names(rest) == ["n2", "n2a"]


def test_a_list_at_an_exact_revision(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node("n1")
    then = core(api).list_node().metadata.resource_version
    api.objects[NODES, None, "n2"] = node("n2")
    at = core(api).list_node(resource_version=then, resource_version_match="Exact")
    assert [n.metadata.name for n in at.items] == ["n1"]
    api.compact()
    refused(410, core(api).list_node, resource_version=then, resource_version_match="Exact")
    refused(400, core(api).list_node, resource_version=then, _continue="x")


def test_a_metadata_only_list_sends_metadata_alone(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node("n1", labels={"remedy.io/pool": "a"})
    accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
    listed = page(core(api).list_node(_preload_content=False, _headers={"Accept": accept}))
    assert listed["kind"] == "PartialObjectMetadataList"
    [item] = listed["items"]
    assert set(item) == {"kind", "apiVersion", "metadata"}
    assert item["metadata"]["labels"] == {"remedy.io/pool": "a"}


# -- PodDisruptionBudgets: the status decides, lags, and conflicts ------------------------------


def web(api: ApiServer, pods: int, min_available: int) -> None:
    api.objects[NODES, None, "n1"] = node()
    for i in range(pods):
        api.objects[PODS, "jobs", f"web{i}"] = pod(f"web{i}", labels={"app": "web"})
    api.objects[PDBS, "jobs", "web"] = budget("web", min_available=min_available)


def test_the_disruption_controller_writes_the_budgets_status(api: ApiServer) -> None:
    web(api, pods=3, min_available=1)
    status = api.objects[PDBS, "jobs", "web"]["status"]
    assert status == {
        "observedGeneration": 1,
        "disruptionsAllowed": 2,
        "currentHealthy": 3,
        "desiredHealthy": 1,
        "expectedPods": 3,
    }
    core(api).create_namespaced_pod_eviction("web0", "jobs", eviction("web0"))
    assert api.objects[PDBS, "jobs", "web"]["status"]["disruptionsAllowed"] == 1


def test_a_budget_whose_status_lags_refuses_until_the_controller_catches_up(
    api: ApiServer,
) -> None:
    api.disruption.paused = True
    web(api, pods=2, min_available=1)
    body = refused(429, core(api).create_namespaced_pod_eviction, "web0", "jobs", eviction("web0"))
    assert "is still being processed" in body["details"]["causes"][0]["message"]
    api.disruption.sync()
    core(api).create_namespaced_pod_eviction("web0", "jobs", eviction("web0"))
    # Still paused: the status says one disruption was taken, whatever the pods say now.
    body = refused(429, core(api).create_namespaced_pod_eviction, "web1", "jobs", eviction("web1"))
    assert "needs 1 healthy pods and has 2 currently" in body["details"]["causes"][0]["message"]


def test_a_concurrent_eviction_of_the_same_budget_is_a_409(api: ApiServer) -> None:
    web(api, pods=3, min_available=1)

    # Another client took a disruption from the same budget meanwhile.
    api.meanwhile(EVICT.format("web0"), lambda: take_disruption(api, "web", "web2"))
    body = refused(409, core(api).create_namespaced_pod_eviction, "web0", "jobs", eviction("web0"))
    assert body["message"] == (
        'Operation cannot be fulfilled on poddisruptionbudgets.policy "web": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    assert (PODS, "jobs", "web0") in api.objects  # not evicted
    core(api).create_namespaced_pod_eviction("web0", "jobs", eviction("web0"))  # a retry goes
