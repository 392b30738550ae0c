"""Scale and robustness of the Kubernetes calls (issue 17): lists read a page at a time as raw
JSON (defect 3), a node's NodeClaim found from its owner reference (defect 3), a missing
NodeClaim CRD refused rather than read as a gone node (defect 6), and a timeout on every call
(defect 10)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.config import api_client
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused, TransientError
from remedy.disruption.budget import CLUSTER_POOL
from remedy.scan.cluster import Cluster
from tests.kube import NODECLAIMS, NODES, NOW, kube, node, sent

CLAIMS_PATH = "/apis/karpenter.sh/v1/nodeclaims"

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a stuck server or load balancer)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return  # the listener closed: the test is over

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in accepted:  # a client still waiting (the old code) sees it hang up
        connection.close()


def within(seconds: float, fn: Any) -> Any:
    """``fn()``'s result or exception; a call still blocked after ``seconds`` fails the test
    (in a daemon thread: without a timeout it would block forever)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        pytest.fail(f"the call was still blocked after {seconds} s: it has no timeout")
    return outcome[0]


def test_defect_10_a_call_to_a_server_that_never_answers_fails_transiently(
    silent_server: int, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(port=silent_server))
    # As `remedy controller --kube-timeout 0.2` builds it; every call gets the timeout.
    cluster = kubernetes_cluster(api_client(str(kubeconfig), timeout=(0.2, 0.2)))
    for call in (cluster.fleet.nodes, lambda: cluster.marks.conditions("n1")):
        error = within(20, call)
        assert isinstance(error, TransientError), error
        assert "timed out" in str(error)


# -- defect 3: lists a page at a time, raw JSON ------------------------------------------------
class ModelWatch(k8s.ApiClient):
    """A real ApiClient that notes every response type it builds the client's models for."""

    def __init__(self, configuration: k8s.Configuration) -> None:
        super().__init__(configuration)
        self.models: list[str] = []

    def deserialize(self, response_text: Any, response_type: Any, content_type: Any) -> Any:
        self.models.append(str(response_type))
        return super().deserialize(response_text, response_type, content_type)


def fleet(api: ApiServer, count: int) -> None:
    for i in range(count):
        pool = "a" if i % 3 else "b"
        api.objects[NODES, None, f"n{i:04d}"] = node(f"n{i:04d}", labels={"remedy.io/pool": pool})


def test_defect_3_the_fleet_scan_reads_every_page_of_nodes(api: ApiServer) -> None:
    fleet(api, 1203)
    cluster = kube(api)
    facts = cluster.fleet.nodes()
    assert sorted(f.name for f in facts) == [f"n{i:04d}" for i in range(1203)]
    pages = [r.query for r in sent(api, "GET", "/api/v1/nodes")]
    assert [p.get("limit") for p in pages] == ["500", "500", "500"]
    assert "continue" not in pages[0] and all(p.get("continue") for p in pages[1:])


def test_defect_3_the_pool_size_counts_every_page_and_asks_for_metadata_only(
    api: ApiServer,
) -> None:
    fleet(api, 1203)
    cluster = kube(api)
    assert cluster.fleet.pool_size("a") == 802
    assert cluster.fleet.pool_size("default") == 1203  # the whole cluster
    assert cluster.fleet.pool_size(CLUSTER_POOL) == 1203  # the cluster's breaker: every node
    requests = sent(api, "GET", "/api/v1/nodes")
    by_label, (one, two, three), cluster_wide = requests[:2], requests[2:5], requests[5:]
    assert [r.query.get("labelSelector") for r in by_label] == ["remedy.io/pool=a"] * 2
    assert all("PartialObjectMetadataList" in r.headers["accept"] for r in by_label)
    assert [r.query.get("limit") for r in (one, two, three)] == ["500"] * 3
    assert [r.query.get("labelSelector") for r in cluster_wide] == [None] * 3


def test_defect_3_lists_are_not_built_into_the_clients_models(api: ApiServer) -> None:
    fleet(api, 3)
    config = k8s.Configuration()
    config.host = api.url
    watch = ModelWatch(config)
    cluster = kubernetes_cluster(watch, clock=lambda: NOW)
    assert len(cluster.fleet.nodes()) == 3 and cluster.fleet.pool_size("b") == 1
    cluster.marks.conditions("n0000")  # one node read: through the models (the watch works)
    assert watch.models == ["V1Node"]  # the lists never went through them


# -- defect 3: a node's NodeClaim from its owner reference --------------------------------------
def claim(node_name: str, provider: str = "") -> dict[str, Any]:
    status = {"nodeName": node_name} | ({"providerID": provider} if provider else {})
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "status": status}


def karpenter_node(owner: str | None = None, provider: str = "") -> dict[str, Any]:
    n1 = node(labels={"karpenter.sh/nodepool": "gpu"})
    if owner:
        n1["metadata"]["ownerReferences"] = [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": owner, "uid": "c-1"}
        ]
    if provider:
        n1["spec"]["providerID"] = provider
    return n1


def replace(cluster: Cluster) -> str | Exception:
    try:
        return cluster.replacer.replace("n1", "")
    except Exception as exc:  # noqa: BLE001 - the test reads it
        return exc


def test_defect_3_the_nodeclaim_is_the_one_the_nodes_owner_reference_names(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = karpenter_node(owner="gpu-b")
    # A stale claim still naming n1 (its node was replaced under the same name), listed first.
    api.objects[NODECLAIMS, None, "gpu-a"] = claim("n1")
    api.objects[NODECLAIMS, None, "gpu-b"] = claim("n1")
    assert "deleted Karpenter NodeClaim gpu-b" in str(replace(kube(api)))
    assert [k[2] for k in api.objects.keys(NODECLAIMS)] == ["gpu-a"]
    assert sent(api, "GET", CLAIMS_PATH) == []  # one GET by name, no list of every claim
    assert len(sent(api, "GET", f"{CLAIMS_PATH}/gpu-b")) == 1


def test_defect_3_without_an_owner_reference_the_claim_is_matched_by_provider_id(
    api: ApiServer,
) -> None:
    provider = "aws:///us-east-1a/i-0b"
    api.objects[NODES, None, "n1"] = karpenter_node(provider=provider)
    api.objects[NODECLAIMS, None, "gpu-a"] = claim("n1", "aws:///us-east-1a/i-0a")
    api.objects[NODECLAIMS, None, "gpu-b"] = claim("n1", provider)
    assert "deleted Karpenter NodeClaim gpu-b" in str(replace(kube(api)))
    assert [k[2] for k in api.objects.keys(NODECLAIMS)] == ["gpu-a"]
    assert [r.query.get("limit") for r in sent(api, "GET", CLAIMS_PATH)] == ["500"]


@pytest.mark.parametrize("owner", ["gpu-b", None], ids=["owner reference", "provider id"])
def test_defect_6_a_missing_nodeclaim_crd_is_a_refusal_not_a_gone_node(
    api: ApiServer, owner: str | None
) -> None:
    api.objects[NODES, None, "n1"] = karpenter_node(owner=owner, provider="aws:///x/i-0b")
    missing = "the server could not find the requested resource"
    api.fail(f"get {CLAIMS_PATH}", 404, times=None, message=missing)
    api.fail(f"get {CLAIMS_PATH}/gpu-b", 404, times=None, message=missing)
    refused = replace(kube(api))
    assert isinstance(refused, ActionRefused), refused
    assert "Karpenter's NodeClaim CRD is not installed" in str(refused)
    assert sent(api, "DELETE", "/api/v1/nodes/n1") == []


def test_defect_3_an_owning_nodeclaim_already_gone_is_a_replacement_under_way(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = karpenter_node(owner="gpu-b")
    api.objects[NODECLAIMS, None, "gpu-a"] = claim("n1")  # the collection is there
    assert replace(kube(api)) == "NodeClaim gpu-b is already gone: Karpenter is replacing n1"
    assert sent(api, "DELETE", f"{CLAIMS_PATH}/gpu-a") == []
