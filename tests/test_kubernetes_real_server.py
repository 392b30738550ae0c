"""The small differences a real API server makes (issue 27), each against the strict emulator:
a 409 on an eviction that is not a gone pod, a NodeClaim deleted by its UID only, a continue
token that expired, the pool size taken from the scan's list, a field manager on every write,
and a controller without a kubeconfig."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.eviction import Answer, evict
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.objects import AGENT_MANAGER, CONTROLLER_MANAGER
from kubeapi import ApiServer
from remedy.attribution.evidence import RecentXid
from tests.kube import (
    NODECLAIMS,
    NODES,
    NOW,
    OWNER,
    PDBS,
    PODS,
    budget,
    call,
    core,
    gpu_problem,
    kube,
    node,
    pod,
    sent,
    take_disruption,
)
from workers.cli import app

EVICT = "POST /api/v1/namespaces/jobs/pods/{}/eviction"


# -- a 409 on an eviction: gone, or the budget changed under it ---------------------------------


def test_a_409_on_an_eviction_is_a_gone_pod_only_when_the_pod_is_gone(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    for name in ("web0", "web1", "web2"):
        api.objects[PODS, "jobs", name] = pod(name, labels={"app": "web"})
    api.objects[PDBS, "jobs", "web"] = budget("web", min_available=1)
    web0, web1 = api.objects[PODS, "jobs", "web0"], api.objects[PODS, "jobs", "web1"]
    # Another eviction took a disruption from the same budget meanwhile: web0 is still there.
    api.meanwhile(EVICT.format("web0"), lambda: take_disruption(api, "web", "web2"))
    concurrent = evict(core(api), web0, CONTROLLER_MANAGER)
    assert concurrent.answer is Answer.RETRY
    assert "the object has been modified" in concurrent.reason
    assert evict(core(api), web0, CONTROLLER_MANAGER).answer is Answer.EVICTED  # asked again
    # A pod recreated under the name (another UID): the one we meant is gone.
    recreated = pod("web1", labels={"app": "web"})
    recreated["metadata"]["uid"] = "uid-web1-again"
    api.objects[PODS, "jobs", "web1"] = recreated
    assert evict(core(api), web1, CONTROLLER_MANAGER).answer is Answer.GONE


# -- the NodeClaim deleted is the one read ------------------------------------------------------


async def test_replace_never_deletes_a_nodeclaim_karpenter_made_since_under_the_same_name(
    api: ApiServer,
) -> None:
    owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "claim-a", "uid": "a1"}
    n1 = node(labels={"karpenter.sh/nodepool": "gpu"})
    n1["metadata"]["ownerReferences"] = [owner]
    api.objects[NODES, None, "n1"] = n1
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"uid": "a1"}}
    api.objects[NODECLAIMS, None, "claim-a"] = claim

    def karpenter_replaced_it() -> None:  # between remedy's read and its delete
        api.objects[NODECLAIMS, None, "claim-a"] = {**claim, "metadata": {"uid": "a2"}}

    api.before("DELETE /apis/karpenter.sh/v1/nodeclaims/claim-a", karpenter_replaced_it)
    said = await call(kube(api).replacer.replace, "n1", "")
    assert said == "NodeClaim claim-a is already gone: Karpenter is replacing n1"
    [delete] = sent(api, "DELETE", "/apis/karpenter.sh/v1/nodeclaims/claim-a")
    assert delete.data["preconditions"] == {"uid": "a1"}
    assert api.objects[NODECLAIMS, None, "claim-a"]["metadata"]["uid"] == "a2"  # still there


# -- a continue token that expired: the list starts again ---------------------------------------


def test_a_list_whose_continue_token_expired_starts_again_and_repeats_nothing(
    api: ApiServer,
) -> None:
    for i in range(5):
        api.objects[NODES, None, f"n{i}"] = node(f"n{i}")
    listing = list_pages(core(api).list_node, what="nodes", limit=2)
    seen = [n["metadata"]["name"] for n in itertools.islice(listing, 2)]
    api.objects[NODES, None, "n0a"] = node("n0a")
    api.compact()  # the first page's snapshot is gone: its token is 410 now
    seen += [n["metadata"]["name"] for n in listing]
    assert sorted(seen) == ["n0", "n0a", "n1", "n2", "n3", "n4"]
    pages = [("continue" in r.query, r.status) for r in sent(api, "GET", "/api/v1/nodes")]
    assert pages == [(False, 200), (True, 410), (False, 200), (True, 200), (True, 200)]


# -- the pool size from the scan's list ---------------------------------------------------------


def test_the_pool_size_is_taken_from_the_scans_list_while_it_is_recent(api: ApiServer) -> None:
    for i in range(5):
        api.objects[NODES, None, f"n{i}"] = node(f"n{i}", labels={"remedy.io/pool": "ab"[i % 2]})
    now = [NOW]
    fleet = kube(api, clock=lambda: now[0]).fleet
    fleet.nodes()  # the scan
    listed = len(sent(api, "GET", "/api/v1/nodes"))
    sizes = [fleet.pool_size(p) for p in ("a", "b", "default", "c") * 20]  # 80 ladders start
    assert sizes[:4] == [3, 2, 5, 0]
    assert len(sent(api, "GET", "/api/v1/nodes")) == listed  # none listed the nodes again
    now[0] += timedelta(minutes=5)  # no scan since: counted afresh
    assert fleet.pool_size("a") == 3
    assert len(sent(api, "GET", "/api/v1/nodes")) == listed + 1


# -- every write names its writer ---------------------------------------------------------------


async def test_every_write_names_its_field_manager_and_the_agents_are_told_apart(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    api.objects[PODS, "jobs", "web"] = pod("web", gpus=8)
    agent = kubernetes_cluster(api.client(), clock=lambda: NOW, field_manager=AGENT_MANAGER)
    controller = kube(api)
    await call(agent.marks.set_conditions, "n1", [gpu_problem()])
    await call(agent.marks.record_xids, "n1", [RecentXid(code=79, gpu="g3", at=NOW)])
    await call(controller.control.cordon, "n1", OWNER)
    await call(controller.control.drain, "n1", lambda left: None, "drain-1")
    writes = [r for r in api.requests if r.method in ("POST", "PUT", "PATCH")]
    assert {(r.method, r.path.rsplit("/", 1)[-1]) for r in writes} >= {
        ("PATCH", "status"),
        ("PATCH", "n1"),
        ("POST", "events"),
        ("POST", "eviction"),
    }
    assert [r.path for r in writes if "fieldManager" not in r.query] == []
    fields = {
        e["manager"]: e["fieldsV1"]
        for e in api.objects[NODES, None, "n1"]["metadata"]["managedFields"]
    }
    assert set(fields) == {AGENT_MANAGER, CONTROLLER_MANAGER}
    assert "f:conditions" in fields[AGENT_MANAGER]["f:status"]
    assert "f:unschedulable" in fields[CONTROLLER_MANAGER]["f:spec"]


# -- a controller that cannot reach Kubernetes says so -----------------------------------------


@pytest.mark.parametrize("kubeconfig", [None, "garbage: [", "current-context: nowhere"])
def test_controller_without_a_usable_kubeconfig_is_one_line_and_exit_4(
    kubeconfig: str | None, tmp_path: Path
) -> None:
    args = ["controller"]
    if kubeconfig is not None:
        (tmp_path / "config").write_text(kubeconfig)
        args += ["--kubeconfig", str(tmp_path / "config")]
    env = {"HOME": str(tmp_path), "KUBECONFIG": None, "KUBERNETES_SERVICE_HOST": None}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 4, result.output
    [line] = result.output.splitlines()
    assert line.startswith("error: no usable Kubernetes configuration: not running in a pod")
    assert "Traceback" not in result.output
