"""The Kubernetes seams over real HTTP against the strict API emulator (kubeapi): objects, the
seams built on it, and what was sent. Shared by the Kubernetes contract tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.sim.identity import agent_signing_key
from kubeapi import ApiServer, Request
from remedy.detection.conditions import NodeCondition
from remedy.scan.cluster import Cluster, CordonOwner
from remedy.trust.identity import AGENT_KEY_ANNOTATION
from remedy.trust.signing import public_blob

T = TypeVar("T")
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
OWNER = CordonOwner(workflow_id="node-remediation/n1", reason="Xid 79 on GPU 3")
NODES = "v1/nodes"
PODS = "v1/pods"
JOBS = "batch/v1/jobs"
NODECLAIMS = "karpenter.sh/v1/nodeclaims"
PDBS = "policy/v1/poddisruptionbudgets"
DAEMONSETS = "apps/v1/daemonsets"


def kube(api: ApiServer, **options: Any) -> Cluster:
    """The Kubernetes seams on the emulator, quick to retry and give up; ``options`` override."""
    quick: dict[str, Any] = {"clock": lambda: NOW, "eviction_retry_s": 0.01, "drain_timeout_s": 2.0}
    return kubernetes_cluster(api.client(), **(quick | options))


def node(
    name: str = "n1",
    *,
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    # Its agent's key, as the agent publishes it (the simulated agents sign with it: tests that
    # report for a node on the emulator report as its agent; adapters/sim/identity.py).
    published = {AGENT_KEY_ANNOTATION: public_blob(agent_signing_key(name))}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels or {},
            "annotations": published | (annotations or {}),
        },
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}]},
    }


def pod(
    name: str,
    *,
    node_name: str = "n1",
    owner: str | None = "ReplicaSet",
    gpus: int = 0,
    phase: str = "Running",
    mirror: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as its controller (``owner``: a controller ownerReference) made it."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    owners = [{"kind": owner, "name": "o", "apiVersion": "apps/v1", "uid": "x", "controller": True}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "jobs",
            "uid": f"uid-{name}",
            "labels": labels or {},
            "ownerReferences": owners if owner else [],
            "annotations": {"kubernetes.io/config.mirror": "x"} if mirror else {},
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "i", "resources": resources}],
        },
        "status": {"phase": phase},
    }


def budget(app: str, *, min_available: int | str) -> dict[str, Any]:
    """A PodDisruptionBudget over the pods labelled ``app=<app>`` in "jobs"."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": "jobs"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def daemonset(name: str = "o", namespace: str = "jobs") -> dict[str, Any]:
    """The DaemonSet that ``pod(owner="DaemonSet")`` names: a drain leaves such a pod only
    while its DaemonSet exists (kubectl's rule)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


async def call(fn: Callable[..., T], *args: Any) -> T:
    # The kubernetes client is synchronous: keep the event loop free.
    return await asyncio.to_thread(fn, *args)


def sent(api: ApiServer, method: str, path: str) -> list[Request]:
    return api.sent(method, path)


def core(api: ApiServer) -> k8s.CoreV1Api:
    """The official client's core API on the emulator, as another client (kubectl) uses it."""
    return k8s.CoreV1Api(api.client())


def refused(status: int, call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The Status body of a call the server must refuse with ``status``."""
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    assert caught.value.status == status, caught.value.body
    body: dict[str, Any] = json.loads(caught.value.body)
    return body


def take_disruption(api: ApiServer, budget_name: str, pod_name: str) -> None:
    """What another client's eviction of ``pod_name`` does to the budget in "jobs": one
    disruption less, the pod recorded as disrupted (a new resourceVersion)."""
    taken = api.objects[PDBS, "jobs", budget_name]
    taken["status"]["disruptionsAllowed"] -= 1
    taken["status"]["disruptedPods"] = {pod_name: api.clock.stamp()}
    api.objects[PDBS, "jobs", budget_name] = taken


def gpu_problem() -> NodeCondition:
    """The condition an agent publishes for an Xid 79 (at NOW)."""
    return NodeCondition(
        type="GpuProblem",
        status="True",
        reason="Xid79",
        message="GPU 3 fell off the bus",
        last_heartbeat_time=NOW,
        last_transition_time=NOW,
    )
