"""One repairer per node: a node Karpenter is repairing (or disrupting, or deleting) is left
alone by remedy — no cordon, no drain, no ladder started by the scan — and a node without one is
remediated as before. On the strict API emulator, over HTTP.

The marks are Karpenter's own (kubernetes-sigs/karpenter): the ``karpenter.sh/disrupted:
NoSchedule`` taint its disruption and termination controllers add (pkg/apis/v1/taints.go,
``DisruptedNoScheduleTaint``: "applied by the disruption and termination controllers to nodes
disrupted by Karpenter"), ``karpenter.sh/rebooting:NoSchedule`` while it reboots a node for
repair (the same file, v1.15), and node repair's ``kubeClient.Delete(ctx, nodeClaim)``
(pkg/controllers/node/health/controller.go ``deleteNodeClaim``), which leaves the NodeClaim
with a ``deletionTimestamp`` while its ``karpenter.sh/termination`` finalizer holds it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.control import DO_NOT_DISRUPT, DO_NOT_REPAIR
from adapters.kubernetes.objects import AGENT_MANAGER
from adapters.kubernetes.repairers import on_claim, on_node
from adapters.sim import SimFleet
from contract.names import ACTIVE_CHECK_WORKFLOW
from kubeapi import ApiServer
from remedy.core.errors import OtherRepairer
from remedy.core.models import NodeRef
from remedy.detection.conditions import GPU_PROBLEM
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import (
    ActiveCheckPolicy,
    CheckResult,
    NodeCheckInput,
    NodeCheckResult,
    due_nodes,
)
from remedy.scan.fleet import NodeStatus, OpenWork, plan_scan, status_of
from tests.conftest import running_workers
from tests.kube import NODECLAIMS, NODES, NOW, OWNER, call, kube, node, sent
from tests.test_ladder_on_kubernetes import NODE, adapter, ecc_ladder, patches

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}  # Karpenter sets no value
REBOOTING = {"key": "karpenter.sh/rebooting", "effect": "NoSchedule"}
FINALIZER = "karpenter.sh/termination"


def karpenter_node(name: str = "n1", claim: str = "claim-a", **kw: Any) -> dict[str, Any]:
    """A node as Karpenter registers it: its NodeClaim its owner, its NodePool label."""
    made = node(name, labels={"karpenter.sh/nodepool": "gpu"}, **kw)
    made["metadata"]["ownerReferences"] = [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": claim, "uid": "c-uid"}
    ]
    return made


def seed_claim(api: ApiServer, node_name: str, name: str = "claim-a") -> None:
    api.objects[NODECLAIMS, None, name] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "finalizers": [FINALIZER]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass"}},
        "status": {"nodeName": node_name, "providerID": "aws:///us-east-1a/i-0a"},
    }


def karpenter_repairs(api: ApiServer, name: str = "claim-a") -> None:
    """Node repair deletes the NodeClaim (as Karpenter does, over the API): its finalizer keeps
    it, with a deletionTimestamp."""
    k8s.CustomObjectsApi(api.client()).delete_cluster_custom_object(
        "karpenter.sh", "v1", "nodeclaims", name
    )
    assert api.objects[NODECLAIMS, None, name]["metadata"]["deletionTimestamp"]


def reasons(api: ApiServer) -> list[str]:
    return [r.data["reason"] for r in api.requests if r.path.endswith("/events")]


# -- the marks ----------------------------------------------------------------------------------
def test_the_marks_karpenter_leaves_name_it() -> None:
    assert on_node(node(taints=[DISRUPTED])) is not None
    assert "rebooting" in (on_node(node(taints=[REBOOTING])) or "")
    deleting = node()
    deleting["metadata"] |= {"deletionTimestamp": "2026-11-29T08:00:00Z", "finalizers": [FINALIZER]}
    assert "deleted by Karpenter" in (on_node(deleting) or "")
    claim = {"metadata": {"name": "claim-a", "deletionTimestamp": "2026-11-29T08:00:00Z"}}
    assert "claim-a is being deleted" in (on_claim(claim) or "")
    # remedy's own cordon, someone's NoSchedule taint, a live claim: nobody else at work
    ours = node(taints=[{"key": "remedy.io/remediating", "value": "true", "effect": "NoSchedule"}])
    assert on_node(ours) is None and on_node(node(unschedulable=True)) is None
    assert on_claim({"metadata": {"name": "claim-a"}}) is None


# -- the adapter: never a write on another repairer's node ---------------------------------------
async def test_no_cordon_nor_drain_on_a_node_karpenter_is_disrupting(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node(taints=[DISRUPTED])
    cluster = kube(api)
    with pytest.raises(OtherRepairer, match="karpenter.sh/disrupted"):
        await call(cluster.control.cordon, "n1", OWNER)
    with pytest.raises(OtherRepairer):
        await call(cluster.control.drain, "n1", lambda _: None, "k1")
    assert not sent(api, "PATCH", "/api/v1/nodes/n1")
    assert reasons(api) == ["RemedySteppedBack", "RemedySteppedBack"]  # said on the node
    boot = await call(cluster.control.node_boot, "n1")
    assert boot.other_repairer is not None  # a reboot or a replacement does not go ahead


async def test_a_nodeclaim_being_deleted_is_karpenters_repair_in_progress(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = karpenter_node()
    seed_claim(api, "n1")
    karpenter_repairs(api)
    with pytest.raises(OtherRepairer, match="NodeClaim claim-a is being deleted"):
        await call(kube(api).control.cordon, "n1", OWNER)
    assert not sent(api, "PATCH", "/api/v1/nodes/n1")


async def test_a_live_claim_or_no_nodeclaim_api_lets_remedy_act(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = karpenter_node()
    seed_claim(api, "n1")
    assert (await call(kube(api).control.cordon, "n1", OWNER)).value == "cordoned"
    # A cluster without Karpenter's CRD answers 404 for the claim: nobody else at work.
    api.objects[NODES, None, "n2"] = karpenter_node("n2", claim="claim-b")
    api.fail("GET /apis/karpenter.sh/v1/nodeclaims/claim-b", 404, times=None)
    assert (await call(kube(api).control.cordon, "n2", OWNER)).value == "cordoned"


async def test_remedys_cordon_vetoes_karpenters_repair_until_restore(api: ApiServer) -> None:
    """While remedy's ladder holds the node it is remedy's to repair: its cordon sets
    ``karpenter.sh/do-not-repair: "true"`` (Karpenter's veto of node repair, alpha: the
    karpenter.sh "Well-Known Annotations" reference, "Users set this to block node repair,
    independently of karpenter.sh/do-not-disrupt") and its restore removes it; one an
    operator set before stays theirs."""
    api.objects[NODES, None, "n1"] = karpenter_node()
    seed_claim(api, "n1")
    cluster = kube(api)
    await call(cluster.control.cordon, "n1", OWNER)
    said = api.objects[NODES, None, "n1"]["metadata"]["annotations"]
    assert said[DO_NOT_REPAIR] == "true" and said[DO_NOT_DISRUPT] == "true"
    assert await call(cluster.control.restore, "n1") is True
    assert DO_NOT_REPAIR not in api.objects[NODES, None, "n1"]["metadata"]["annotations"]

    theirs = api.objects[NODES, None, "n1"]
    theirs["metadata"]["annotations"][DO_NOT_REPAIR] = "true"
    api.objects[NODES, None, "n1"] = theirs
    await call(cluster.control.cordon, "n1", OWNER)
    await call(cluster.control.restore, "n1")
    assert api.objects[NODES, None, "n1"]["metadata"]["annotations"][DO_NOT_REPAIR] == "true"


async def test_the_agents_own_cordon_reads_the_nodes_marks_only(api: ApiServer) -> None:
    """The agent's role reads no NodeClaims: its cordon before a report refuses on Karpenter's
    taint, and does not ask for the claim (its ladder's own steps do)."""
    agent = kube(api, field_manager=AGENT_MANAGER)
    api.objects[NODES, None, "n1"] = karpenter_node(taints=[DISRUPTED])
    seed_claim(api, "n1")
    with pytest.raises(OtherRepairer):
        await call(agent.control.cordon, "n1", OWNER)
    api.objects[NODES, None, "n2"] = karpenter_node("n2", claim="claim-b")
    seed_claim(api, "n2", "claim-b")
    karpenter_repairs(api, "claim-b")
    assert (await call(agent.control.cordon, "n2", OWNER)).value == "cordoned"
    assert not [r for r in api.requests if "nodeclaims/" in r.path and r.method == "GET"]


# -- the fleet scan: nothing started, and not counted healthy -------------------------------------
async def test_the_scan_starts_nothing_on_a_node_karpenter_is_repairing(api: ApiServer) -> None:
    bad = node("n1", taints=[DISRUPTED])
    bad["status"]["conditions"].append(
        {"type": GPU_PROBLEM, "status": "True", "reason": "Xid79", "message": "GPU fell off"}
    )
    api.objects[NODES, None, "n1"] = bad
    api.objects[NODES, None, "n2"] = node("n2")
    facts = {f.name: f for f in await call(kube(api).fleet.nodes)}
    assert facts["n1"].other_repairer is not None and facts["n2"].other_repairer is None
    assert status_of(facts["n1"], OpenWork()) is NodeStatus.OTHER_REPAIRER
    assert plan_scan(list(facts.values()), OpenWork()).remediate == []
    # the same fault on a node nobody else repairs: a ladder, as before
    alone = facts["n1"].model_copy(update={"other_repairer": None})
    assert alone.problems and status_of(alone, OpenWork()) is NodeStatus.UNHEALTHY
    assert [n.name for n in plan_scan([alone], OpenWork()).remediate] == ["n1"]


async def test_an_active_check_is_not_started_nor_run_on_another_repairers_node(
    time_env: WorkflowEnvironment, api: ApiServer
) -> None:
    """The round plans no check there, and a check that raced the taint is skipped at its
    cordon (nothing written, no diagnose), not failed."""
    api.objects[NODES, None, NODE] = node(NODE, taints=[DISRUPTED])
    facts = await call(adapter(api).fleet.nodes)
    assert due_nodes(facts, ActiveCheckPolicy(), NOW) == []
    fleet = SimFleet(nodes=1, name_prefix="k8s", pool=f"pool-{uuid.uuid4().hex[:8]}")
    async with running_workers(time_env.client, fleet, cluster=adapter(api)) as queues:
        done = await time_env.client.execute_workflow(
            ACTIVE_CHECK_WORKFLOW,
            NodeCheckInput(node=NodeRef(name=NODE), take_out=False, node_task_queue=queues.agents),
            id=f"check-{uuid.uuid4().hex[:8]}",
            task_queue=queues.controller,
            result_type=NodeCheckResult,
        )
    assert done.result is CheckResult.SKIPPED and "karpenter.sh/disrupted" in done.detail
    assert [p for p in patches(api) if "spec" in p] == [] and fleet.actions == []


# -- the ladder ----------------------------------------------------------------------------------
async def test_a_ladder_leaves_a_node_under_karpenter_repair_alone(
    time_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    api.objects[NODES, None, NODE] = karpenter_node(NODE)
    seed_claim(api, NODE)
    karpenter_repairs(api)
    result = await ecc_ladder(time_env, api, shipped_runbooks)
    assert result.outcome is Outcome.OTHER_REPAIRER
    assert "NodeClaim claim-a is being deleted" in result.detail
    assert [p for p in patches(api) if "spec" in p] == []  # no cordon
    assert not [r for r in api.requests if r.path.endswith("/eviction")]  # no drain
    assert "RemedySteppedBack" in reasons(api)
    assert api.objects[NODES, None, NODE]["spec"]["unschedulable"] is False


async def test_a_repair_that_begins_mid_ladder_stops_it_before_the_drain(
    time_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    """Karpenter taints the node once remedy cordoned it: the drain is not done, the ladder
    ends, and remedy's cordon stays (the node is faulty; Karpenter drains it its own way)."""
    api.objects[NODES, None, NODE] = node(NODE)

    def karpenter_taints_it() -> None:
        tainted = api.objects[NODES, None, NODE]
        tainted["spec"]["taints"] = [*tainted["spec"].get("taints", []), DISRUPTED]
        api.objects[NODES, None, NODE] = tainted

    api.before("POST /api/v1/namespaces/default/events", karpenter_taints_it)  # RemedyCordoned
    result = await ecc_ladder(time_env, api, shipped_runbooks)
    assert result.outcome is Outcome.OTHER_REPAIRER, result.detail
    cordon, drain = result.attempts[0], result.attempts[-1]
    assert cordon.detail == "cordoned" and drain.result is AttemptResult.FAILED
    assert "karpenter.sh/disrupted" in drain.detail
    assert not [r for r in api.requests if r.path.endswith("/eviction")]
    assert api.objects[NODES, None, NODE]["spec"]["unschedulable"] is True


async def test_a_karpenter_node_nobody_repairs_is_remediated_as_before(
    time_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    api.objects[NODES, None, NODE] = karpenter_node(NODE)
    seed_claim(api, NODE)
    result = await ecc_ladder(time_env, api, shipped_runbooks)
    assert result.outcome is Outcome.RECOVERED
    assert "RemedySteppedBack" not in reasons(api)
