"""Draining a node against the strict API server (kubeapi): kubectl drain's rules and defaults,
Karpenter's handling of each eviction answer, per-namespace modes, and API throttling told apart
from a PodDisruptionBudget. Each test is named after the defect it guards (issue 17: 6, 7, 8
and the 429s)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from temporalio.exceptions import ApplicationError
from typer.testing import CliRunner

from activities.errors import temporal_errors
from adapters.kubernetes.drain_modes import DrainMode, DrainModes
from adapters.kubernetes.drain_rules import DrainRules
from adapters.kubernetes.errors import NotFound, api_errors
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused, DrainBlocked, NodeGone, Throttled, TransientError
from remedy.scan.cluster import Cluster
from tests.kube import DAEMONSETS, NODES, PDBS, PODS, budget, call, daemonset, kube, node, pod, sent
from workers.cli import app

EVICT = "/api/v1/namespaces/{}/pods/{}/eviction"
LATER = datetime.now(UTC) + timedelta(hours=1)  # a clock past every deletion in a test


def put(api: ApiServer, *pods: dict[str, Any]) -> None:
    for item in pods:
        api.objects[PODS, item["metadata"]["namespace"], item["metadata"]["name"]] = item


def moved(item: dict[str, Any], namespace: str) -> dict[str, Any]:
    item["metadata"]["namespace"] = namespace
    return item


def evictions(api: ApiServer, name: str, namespace: str = "jobs") -> list[Any]:
    return sent(api, "POST", EVICT.format(namespace, name))


async def drain(cluster: Cluster, progress: Callable[[int], None] = lambda left: None) -> str:
    return await call(cluster.control.drain, "n1", progress, "")


async def until_sent(api: ApiServer, method: str, path: str) -> None:
    """Wait (the drain runs in a thread, in real time) until the drain made this request."""
    await until(lambda: bool(sent(api, method, path)), f"never sent {method} {path}")


async def until(happened: Callable[[], bool], never: str = "it never happened") -> None:
    for _ in range(1000):
        if happened():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(never)


# -- defect 6: a pod deleted mid-drain is done, the node is not gone ---------------------------


async def test_pod_deleted_mid_drain_is_done_not_node_gone(api: ApiServer) -> None:
    cluster = kube(api, checkpoint_grace_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("train", gpus=8), pod("web"), pod("db"))

    def gone(name: str) -> Callable[[], None]:
        def delete() -> None:
            del api.objects[PODS, "jobs", name]

        return delete

    # Deleted by someone else between the drain's read and its write: the checkpoint request
    # (a 404 on the pod's PATCH) and an eviction (a 404 on its POST).
    api.before("patch /api/v1/namespaces/jobs/pods/train", gone("train"))
    api.before(f"post {EVICT.format('jobs', 'web')}", gone("web"))
    assert await drain(cluster) == "evicted 3 pods, left 0 DaemonSet/mirror pods"
    assert (PODS, "jobs", "db") not in api.objects
    assert not evictions(api, "train")


def test_a_404_means_what_the_caller_says() -> None:
    def missing() -> None:
        raise ApiException(status=404, reason="Not Found")

    with pytest.raises(NodeGone), api_errors("get", "nodes/n1"):
        missing()
    with pytest.raises(NotFound), api_errors("list", "nodeclaims", missing=NotFound):
        missing()


# -- defect 7: evictions as Karpenter's eviction queue makes them -----------------------------


async def test_eviction_carries_uid_precondition(api: ApiServer) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("train-0"))

    def recreated() -> None:  # its StatefulSet recreates it under the same name meanwhile
        del api.objects[PODS, "jobs", "train-0"]
        again = pod("train-0")
        again["metadata"]["uid"] = "uid-train-0-again"
        put(api, again)

    api.before(f"post {EVICT.format('jobs', 'train-0')}", recreated)
    assert await drain(cluster) == "evicted 1 pods, left 0 DaemonSet/mirror pods"
    [eviction] = evictions(api, "train-0")  # 409: the pod it meant is gone
    assert eviction.data["deleteOptions"]["preconditions"] == {"uid": "uid-train-0"}
    assert api.objects[PODS, "jobs", "train-0"]["metadata"]["uid"] == "uid-train-0-again"


async def test_eviction_conflict_is_read_again_not_a_failed_drain(api: ApiServer) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web"))
    api.fail(f"post {EVICT.format('jobs', 'web')}", 409)
    assert await drain(cluster) == "evicted 1 pods, left 0 DaemonSet/mirror pods"
    assert len(evictions(api, "web")) == 2  # read again: still the same pod, evicted


async def test_pdb_refusal_is_retried_until_the_budget_allows(api: ApiServer) -> None:
    cluster = kube(api, drain_timeout_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web", labels={"app": "web"}))
    api.objects[PDBS, "jobs", "web"] = budget("web", min_available=1)
    drained = asyncio.create_task(drain(cluster))
    await until_sent(api, "POST", EVICT.format("jobs", "web"))
    assert not drained.done()
    del api.objects[PDBS, "jobs", "web"]
    assert await asyncio.wait_for(drained, 20) == "evicted 1 pods, left 0 DaemonSet/mirror pods"
    assert [r.status for r in evictions(api, "web")][-2:] == [429, 201]


async def test_pod_under_two_budgets_is_retried_and_named_when_the_drain_times_out(
    api: ApiServer,
) -> None:
    cluster = kube(api, drain_timeout_s=0.3)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web", labels={"app": "web"}))
    for name in ("web", "web-too"):
        api.objects[PDBS, "jobs", name] = {
            **budget("web", min_available=0),
            "metadata": {"name": name, "namespace": "jobs"},
        }
    with pytest.raises(DrainBlocked, match=r"jobs/web \(several PodDisruptionBudgets"):
        await drain(cluster)
    assert len(evictions(api, "web")) > 1  # retried like a budget's no
    assert (PODS, "jobs", "web") in api.objects


async def test_terminating_namespace_takes_its_pods_not_permission_denied(
    api: ApiServer,
) -> None:
    cluster = kube(api, drain_timeout_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web"))
    api.objects["v1/namespaces", None, "jobs"] = {
        "metadata": {"name": "jobs"},
        "status": {"phase": "Terminating"},
    }
    drained = asyncio.create_task(drain(cluster))
    await until_sent(api, "POST", EVICT.format("jobs", "web"))
    assert evictions(api, "web")[0].status == 403
    del api.objects[PODS, "jobs", "web"]  # the namespace controller deletes what it holds
    assert await asyncio.wait_for(drained, 20) == "evicted 1 pods, left 0 DaemonSet/mirror pods"


# -- defect 8: kubectl drain's defaults, explicit ----------------------------------------------


async def test_emptydir_pod_refused_without_delete_emptydir_data(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    scratch = pod("scratch")
    scratch["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {}}]
    put(api, scratch, pod("web"))
    with pytest.raises(
        ActionRefused, match=r"local storage \(use --drain-delete-emptydir-data .*\): jobs/scratch"
    ):
        await drain(kube(api))
    assert not [r for r in api.requests if r.path.endswith("/eviction")]  # none touched
    allowed = kube(api, drain_rules=DrainRules(delete_emptydir_data=True))
    assert await drain(allowed) == "evicted 2 pods, left 0 DaemonSet/mirror pods"


async def test_unmanaged_pod_refused_without_force(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    owned = pod("owned")  # owned, but not by a controller: nothing recreates it
    owned["metadata"]["ownerReferences"][0]["controller"] = False
    put(api, pod("bare", owner=None), owned, pod("web"))
    with pytest.raises(
        ActionRefused, match=r"no controller \(use --drain-force .*\): jobs/bare, jobs/owned"
    ):
        await drain(kube(api))
    assert not [r for r in api.requests if r.path.endswith("/eviction")]
    forced = kube(api, drain_rules=DrainRules(force=True))
    assert await drain(forced) == "evicted 3 pods, left 0 DaemonSet/mirror pods"


async def test_daemonset_pod_with_missing_daemonset_refused(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("agent", owner="DaemonSet"))
    with pytest.raises(ActionRefused, match=r"DaemonSet that is gone .*--drain-force.*jobs/agent"):
        await drain(kube(api))
    api.objects[DAEMONSETS, "jobs", "o"] = daemonset()
    assert await drain(kube(api)) == "evicted 0 pods, left 1 DaemonSet/mirror pods"
    assert (PODS, "jobs", "agent") in api.objects
    forced = kube(api, drain_rules=DrainRules(force=True))
    del api.objects[DAEMONSETS, "jobs", "o"]
    assert await drain(forced) == "evicted 1 pods, left 0 DaemonSet/mirror pods"


async def test_notready_node_does_not_wait_out_terminating_pods(api: ApiServer) -> None:
    cluster = kube(api, clock=lambda: LATER)
    api.objects[NODES, None, "n1"] = node(ready=False)
    put(api, pod("web"))
    said = await drain(cluster)
    assert said.endswith("; 1 left Terminating on the NotReady node")
    assert api.objects[PODS, "jobs", "web"]["metadata"]["deletionTimestamp"]  # still there


async def test_notready_node_waits_for_terminating_pods_when_skip_wait_is_off(
    api: ApiServer,
) -> None:
    rules = DrainRules(skip_wait_for_delete_timeout_s=0)
    cluster = kube(api, clock=lambda: LATER, drain_timeout_s=0.3, drain_rules=rules)
    api.objects[NODES, None, "n1"] = node(ready=False)
    put(api, pod("web"))
    with pytest.raises(TransientError, match="evicted pods still on n1: jobs/web"):
        await drain(cluster)


# -- per-namespace modes ------------------------------------------------------------------------


async def test_allow_completion_namespace_waits_for_its_pods_to_finish(api: ApiServer) -> None:
    modes = DrainModes.parse(["training-*=allow-completion"])
    cluster = kube(api, drain_modes=modes, drain_timeout_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    put(api, moved(pod("llm"), "training-a"), pod("web"))
    drained = asyncio.create_task(drain(cluster))
    await until_sent(api, "POST", EVICT.format("jobs", "web"))
    finished = api.objects[PODS, "training-a", "llm"]
    finished["status"]["phase"] = "Succeeded"
    api.objects[PODS, "training-a", "llm"] = finished
    said = await asyncio.wait_for(drained, 20)
    assert said.endswith("; 1 of them left to finish (allow-completion)")
    assert not evictions(api, "llm", "training-a")


async def test_allow_completion_pods_still_running_block_the_drain_at_its_timeout(
    api: ApiServer,
) -> None:
    modes = DrainModes.parse(["*=allow-completion"])
    cluster = kube(api, drain_timeout_s=0.3, drain_modes=modes)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("llm"))
    with pytest.raises(DrainBlocked, match="allow-completion .*: jobs/llm"):
        await drain(cluster)
    assert not evictions(api, "llm")


async def test_delete_after_timeout_deletes_what_a_budget_keeps(api: ApiServer) -> None:
    modes = DrainModes.parse(["jobs=delete-after-timeout"], delete_after_s=0.2)
    cluster = kube(api, drain_modes=modes)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web", labels={"app": "web"}))
    api.objects[PDBS, "jobs", "web"] = budget("web", min_available=1)
    said = await drain(cluster)
    assert said.endswith("; deleted 1 still there after 0.2s")
    assert {r.status for r in evictions(api, "web")} == {429}
    [delete] = sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/web")
    assert delete.query["gracePeriodSeconds"] == "30"  # the pod's own: Kubernetes' default
    assert delete.data["preconditions"] == {"uid": "uid-web"}


async def test_delete_after_timeout_gives_the_pod_its_grace_and_waits_until_it_is_gone(
    api: ApiServer,
) -> None:
    """Deleted with grace 0, a StatefulSet's replacement (same name) could start while the old
    container still held the GPUs (issue 27)."""
    modes = DrainModes.parse(["jobs=delete-after-timeout"], delete_after_s=0.2)
    cluster = kube(api, drain_modes=modes, drain_timeout_s=30.0)
    api.objects[NODES, None, "n1"] = node()
    db = pod("db", labels={"app": "db"})
    db["spec"]["terminationGracePeriodSeconds"] = 45
    put(api, db)
    api.objects[PDBS, "jobs", "db"] = budget("db", min_available=1)
    api.kubelets.stops["jobs", "db"] = None  # it holds on until SIGKILL, 45 s on
    drained = asyncio.create_task(drain(cluster))
    await until_sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/db")
    [delete] = sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/db")
    assert delete.query["gracePeriodSeconds"] == "45"
    looked = len(sent(api, "GET", "/api/v1/pods"))
    await until(lambda: len(sent(api, "GET", "/api/v1/pods")) > looked + 2)
    assert not drained.done()  # Terminating: the drain waits, and deletes nothing again
    api.clock.advance(45)
    said = await asyncio.wait_for(drained, 20)
    assert said.endswith("; deleted 1 still there after 0.2s")
    assert len(sent(api, "DELETE", "/api/v1/namespaces/jobs/pods/db")) == 1


def test_drain_modes_match_names_then_globs_then_the_default() -> None:
    modes = DrainModes.parse(
        ["team-*=allow-completion", "team-x=immediate", "*=delete-after-timeout"]
    )
    assert modes.mode("team-x") is DrainMode.IMMEDIATE
    assert modes.mode("team-y") is DrainMode.ALLOW_COMPLETION
    assert modes.mode("web") is DrainMode.DELETE_AFTER_TIMEOUT
    assert DrainModes().mode("anything") is DrainMode.IMMEDIATE  # kubectl's
    with pytest.raises(ValueError, match="evict-harder"):
        DrainModes.parse(["jobs=evict-harder"])


def test_bad_drain_flags_exit_1_naming_the_flag() -> None:
    result = CliRunner().invoke(app, ["controller", "--drain-mode", "jobs=evict-harder"])
    assert result.exit_code == 1
    assert "--drain-mode" in result.output
    late = ["controller", "--drain-mode", "*=delete-after-timeout", "--drain-delete-after", "3600"]
    result = CliRunner().invoke(app, late)
    assert result.exit_code == 1
    assert "--drain-delete-after" in result.output
    graceful = ["controller", "--drain-mode", "*=delete-after-timeout"]
    result = CliRunner().invoke(app, [*graceful, "--drain-delete-grace-max", "1500"])
    assert result.exit_code == 1
    assert "--drain-delete-grace-max" in result.output


# -- a 429 is a budget only on an eviction ------------------------------------------------------


async def test_throttled_list_is_transient_not_drain_blocked(api: ApiServer) -> None:
    cluster = kube(api)
    api.objects[NODES, None, "n1"] = node()
    put(api, pod("web"))
    api.fail("get /api/v1/pods", 429)  # API priority and fairness, not a budget
    with pytest.raises(Throttled) as raised:
        await drain(cluster)
    assert not isinstance(raised.value, DrainBlocked)
    assert not evictions(api, "web")


def test_throttled_write_is_retried_after_the_servers_retry_after() -> None:
    # urllib3 waits out a GET's Retry-After itself; a write's comes back to remedy.
    def throttled() -> None:
        refused = ApiException(status=429, reason="Too Many Requests")
        refused.headers = {"Retry-After": "7"}
        raise refused

    with pytest.raises(ApplicationError) as failed, temporal_errors():
        with api_errors("patch", "nodes/n1"):
            throttled()
    assert failed.value.type == "Throttled" and not failed.value.non_retryable
    assert failed.value.next_retry_delay == timedelta(seconds=7)
