"""Adding a way to replace nodes: a class that implements ``Replacer``, wired in one place. A
fake cloud stands for the provider's instance API; Kubernetes is the emulator, Temporal real."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from kubernetes import client as k8s
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import Json
from adapters.kubernetes.replace import REPLACERS
from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused
from remedy.core.models import Action
from remedy.ladder.remediation import Outcome, RemediationResult
from remedy.runbook import Match, Runbook, Rung
from remedy.scan.cluster import Cluster
from tests.conftest import running_workers
from tests.kube import NODES, node
from tests.ladder import report

NODE = "gpu-node-001"
REPLACE_ONLY = Runbook(
    name="replace-only",
    match=Match(xids=[79]),
    ladder=[Rung(action=Action.REPLACE, timeout=timedelta(seconds=30))],
)


class FakeCloud:
    """A cloud's instance API as a replacer sees it: terminate one, the autoscaler adds one."""

    def __init__(self) -> None:
        self.terminated: list[str] = []

    def terminate(self, instance: str) -> None:
        self.terminated.append(instance)


class CloudReplacer:
    """The whole recipe on the simulator: implement ``Replacer``."""

    def __init__(self, cloud: FakeCloud) -> None:
        self._cloud = cloud

    def replace(self, node: str, node_uid: str = "") -> str:
        self._cloud.terminate(f"i-{node}")
        return f"terminated instance i-{node}; the cloud brings a new one"


class ProviderIdReplacer:
    """On Kubernetes: the instance is the node's ``spec.providerID`` (``OncePerNode`` around
    it has read the node, checked it is the one the ladder saw, and that remedy manages it)."""

    def __init__(self, nodes: NodeApi, cloud: FakeCloud) -> None:
        self._nodes, self._cloud = nodes, cloud

    def replace_node(self, node: str, current: Json) -> str:
        instance = current.get("spec", {}).get("providerID")
        if not instance:
            raise ActionRefused(f"{node} has no providerID: no instance to terminate")
        self._nodes.event(node, "RemedyReplaced", f"terminated {instance}")
        self._cloud.terminate(instance)
        return f"terminated {instance}; the cloud brings a new one"


async def climb(env: WorkflowEnvironment, fleet: SimFleet, cluster: Cluster) -> RemediationResult:
    """A replace-only ladder for an Xid 79 on the node, through ``cluster``."""
    finding = fleet.inject(NODE, "gpu_lost", gpu=0)
    async with running_workers(env.client, fleet, cluster=cluster) as queues:
        return await (await report(env.client, queues, finding, REPLACE_ONLY)).result()


async def test_a_replacer_swapped_into_the_bundle_runs_the_replace_rung(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    cloud = FakeCloud()
    cluster = dataclasses.replace(fleet.cluster, replacer=CloudReplacer(cloud))
    result = await climb(time_env, fleet, cluster)
    assert result.outcome is Outcome.REPLACED
    assert result.attempts[-1].action is Action.REPLACE
    assert "terminated instance i-gpu-node-001" in result.attempts[-1].detail
    assert cloud.terminated == [f"i-{NODE}"]
    assert fleet.node(NODE).generation == 0  # the simulator's own replacer never ran


async def test_a_registered_replacer_is_chosen_by_name_on_kubernetes(
    time_env: WorkflowEnvironment,
    api: ApiServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cloud = FakeCloud()
    monkeypatch.setitem(REPLACERS, "fake-cloud", lambda nodes: ProviderIdReplacer(nodes, cloud))
    pool = f"pool-{uuid.uuid4().hex[:8]}"  # the budget counts the pool from the node labels
    instance = node(NODE, labels={"remedy.io/pool": pool})
    instance["spec"]["providerID"] = "aws:///us-east-1a/i-0abc"
    api.objects[NODES, None, NODE] = instance
    config = k8s.Configuration()
    config.host = str(api.url).rstrip("/")
    cluster = kubernetes_cluster(k8s.ApiClient(config), replacer="fake-cloud")
    fleet = SimFleet(nodes=2, pool=pool)  # the host side
    result = await climb(time_env, fleet, cluster)
    assert result.outcome is Outcome.REPLACED, result
    assert cloud.terminated == ["aws:///us-east-1a/i-0abc"]
    reasons = [r.data["reason"] for r in api.requests if r.path.endswith("/events")]
    assert reasons == ["RemedyCordoned", "RemedyDrained", "RemedyReplaced"]  # drained first


def test_an_unknown_replacer_name_says_which_there_are() -> None:
    with pytest.raises(ValueError, match="known: auto, karpenter, plain, none"):
        kubernetes_cluster(k8s.ApiClient(), replacer="cloud")
