"""The whole ladder with the Kubernetes adapter on an API emulator for the cluster side and the
simulated node for the host side: what remedy leaves on the Node object at the end."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.control import CORDONED_BY
from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.ladder.remediation import Outcome, RemediationResult
from remedy.runbook import RunbookSet
from remedy.scan.cluster import Cluster
from tests.conftest import running_workers
from tests.kube import NODES, node
from tests.ladder import report

NODE = "k8s-000"


def adapter(api: ApiServer) -> Cluster:
    return kubernetes_cluster(api.client(), eviction_retry_s=0.01)


def patches(api: ApiServer) -> list[dict[str, Any]]:
    return [r.data for r in api.requests if r.method == "PATCH" and r.path.endswith(NODE)]


async def ecc_ladder(
    env: WorkflowEnvironment, api: ApiServer, runbooks: RunbookSet
) -> RemediationResult:
    """An uncorrectable ECC error on the node, remediated through the Kubernetes adapter."""
    pool = f"pool-{uuid.uuid4().hex[:8]}"  # the pool's budget is counted from the node labels
    labelled = api.objects[NODES, None, NODE]
    labelled["metadata"]["labels"]["remedy.io/pool"] = pool
    api.objects[NODES, None, NODE] = labelled
    fleet = SimFleet(nodes=1, name_prefix="k8s", pool=pool)
    fleet.node(NODE).pods = []  # the host side is idle, so the GPU reset can run
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with running_workers(env.client, fleet, cluster=adapter(api)) as queues:
        return await (await report(env.client, queues, finding, runbooks.match(finding))).result()


async def test_node_cordoned_by_someone_else_stays_cordoned_after_the_ladder(
    time_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    api.objects[NODES, None, NODE] = node(
        NODE, unschedulable=True, annotations={"ops/why": "rack maintenance"}
    )
    result = await ecc_ladder(time_env, api, shipped_runbooks)
    assert result.outcome is Outcome.RECOVERED
    assert result.attempts[0].detail == "cordoned_by_other"
    # remedy never touched the other team's cordon (it only labelled the GPU operator's
    # pods off the node for the reset, and back)
    assert [p for p in patches(api) if "spec" in p] == []
    stored = api.objects[NODES, None, NODE]
    assert stored["spec"]["unschedulable"] is True


async def test_remedys_own_cordon_is_undone_on_recovery(
    time_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    api.objects[NODES, None, NODE] = node(NODE)
    result = await ecc_ladder(time_env, api, shipped_runbooks)
    assert result.outcome is Outcome.RECOVERED
    cordon, restore = [p for p in patches(api) if "spec" in p]
    assert cordon["spec"]["unschedulable"] is True
    assert cordon["metadata"]["annotations"][CORDONED_BY] == f"node-remediation/{NODE}"
    assert restore["spec"] == {"unschedulable": False, "taints": []}
    reasons = [r.data["reason"] for r in api.requests if r.path.endswith("/events")]
    assert reasons[0] == "RemedyCordoned" and reasons[-1] == "RemedyRestored"
    assert "RemedyDrained" in reasons
