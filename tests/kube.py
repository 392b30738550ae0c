"""The Kubernetes seams over real HTTP against an API emulator (kmock): objects, the seams
built on it, and what was sent. Shared by the Kubernetes contract tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import kmock
from kubernetes import client as k8s

from adapters.kubernetes.cluster import kubernetes_cluster
from remedy.cluster import Cluster, CordonOwner

T = TypeVar("T")
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
OWNER = CordonOwner(workflow_id="node-remediation/n1", reason="Xid 79 on GPU 3")
NODES = kmock.resource("v1/nodes")
PODS = kmock.resource("v1/pods")
NODECLAIMS = kmock.resource("karpenter.sh/v1/nodeclaims")


def kube(mock: kmock.KubernetesEmulator, **options: Any) -> Cluster:
    """The Kubernetes seams on the emulator, quick to retry and give up; ``options`` override."""
    mock.resources["v1/pods"] = {}  # listable even once the last pod is gone
    config = k8s.Configuration()
    config.host = str(mock.url).rstrip("/")
    quick: dict[str, Any] = {"clock": lambda: NOW, "eviction_retry_s": 0.01, "drain_timeout_s": 2.0}
    return kubernetes_cluster(k8s.ApiClient(config), **(quick | options))


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
