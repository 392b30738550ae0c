"""The per-node policy (deploy/agent-policy.yaml): its CEL expressions evaluated (cel-python)
on the writes the agent makes — allowed on its own node — and on writes it must not make:
another node, a token without a node name, any field that is not remedy's."""

from __future__ import annotations

import copy
import re
from typing import Any

import celpy
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from adapters.kubernetes.control import (
    CORDON_REASON,
    CORDONED_AT,
    CORDONED_BY,
    CORDONED_BY_AGENT,
    DO_NOT_DISRUPT,
    DO_NOT_DISRUPT_SET,
    DO_NOT_REPAIR,
    DO_NOT_REPAIR_SET,
    TAINT,
)
from adapters.kubernetes.objects import GPU_USE, RECENT_XIDS
from kubeapi import ApiServer
from remedy.acting.gpu_use import NodeGpuUse
from remedy.attribution.evidence import RecentXid
from remedy.detection.conditions import AGENT_CONDITIONS, GPU_PROBLEM, REMEDY_READY, NodeCondition
from remedy.trust.identity import AGENT_KEY_ANNOTATION
from remedy.trust.signing import public_blob
from tests.kube import NODES, NOW, call, kube
from tests.test_deploy import by_kind

NODE_NAME = "authentication.kubernetes.io/node-name"
AGENT_KEY = public_blob(Ed25519PrivateKey.from_private_bytes(bytes(32)))
OTHER_KEY = public_blob(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
POLICY = "remedy-agent-own-node"
Json = dict[str, Any]


def policy() -> Json:
    return by_kind("ValidatingAdmissionPolicy")[POLICY]


def agent_user() -> str:
    agent = by_kind("DaemonSet")["remedy-agent"]
    account = agent["spec"]["template"]["spec"]["serviceAccountName"]
    return f"system:serviceaccount:{agent['metadata']['namespace']}:{account}"


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(activation)


def refusals(
    new: Json,
    old: Json,
    *,
    user: str | None = None,
    node: str | None = "n1",
    spec: Json | None = None,
) -> Any:
    """The messages of the validations a write fails ([]: admitted), or None when the policy
    (``spec``: deploy/'s unless given) does not apply to the request (its matchConditions)."""
    spec = spec or policy()["spec"]
    extra = {NODE_NAME: [node]} if node else {}
    request = {"userInfo": {"username": user or agent_user(), "extra": extra}}
    activation: dict[str, Any] = {
        name: celpy.json_to_cel(value)
        for name, value in {"object": new, "oldObject": old, "request": request}.items()
    }
    if not all(_evaluate(m["expression"], activation) for m in spec["matchConditions"]):
        return None
    # Kept as CEL values (a JSON round trip would turn a bool into an int).
    variables = celpy.celtypes.MapType()
    for variable in spec.get("variables", []):
        value = _evaluate(variable["expression"], activation | {"variables": variables})
        variables[celpy.celtypes.StringType(variable["name"])] = value
    activation["variables"] = variables
    return [
        str(
            _evaluate(v["messageExpression"], activation)
            if "messageExpression" in v
            else v["message"]
        )
        for v in spec["validations"]
        if not _evaluate(v["expression"], activation)
    ]


def kubelets_node(name: str = "n1") -> Json:
    """A node as the kubelet keeps it, with someone else's annotation and condition."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.present": "true"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": "aws:///i-1"},
        "status": {
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock"},
            ],
        },
    }


def agent_condition(kind: str, status: str = "False") -> NodeCondition:
    return NodeCondition(
        type=kind,
        status="True" if status == "True" else "False",
        reason="R",
        message="m",
        last_heartbeat_time=NOW,
        last_transition_time=NOW,
    )


def condition(kind: str, status: str = "False") -> Json:
    return {"type": kind, "status": status, "reason": "R", "message": "m"}


def with_conditions(node: Json, *conditions: Json) -> Json:
    """The node after a strategic merge of ``conditions`` (keyed by type)."""
    new = copy.deepcopy(node)
    kept = {c["type"]: c for c in new["status"]["conditions"]}
    new["status"]["conditions"] = [*kept.values()]
    for c in conditions:
        if c["type"] in kept:
            new["status"]["conditions"][list(kept).index(c["type"])] = c
        else:
            new["status"]["conditions"].append(c)
    return new


def changed(node: Json, value: Any, *path: str) -> Json:
    """``node`` with the field at ``path`` set to ``value``, or removed when None."""
    new = copy.deepcopy(node)
    *parents, last = path
    where = new
    for key in parents:
        where = where.setdefault(key, {})
    if value is None:
        del where[last]
    else:
        where[last] = value
    return new


def test_the_policy_binds_the_agents_node_writes_and_denies() -> None:
    spec = policy()["spec"]
    [rule] = spec["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) == {"nodes", "nodes/status"} and rule["apiGroups"] == [""]
    assert rule["operations"] == ["UPDATE"]  # a patch; RBAC gives the agent nothing else
    assert spec["failurePolicy"] == "Fail"
    assert any(NODE_NAME in v["expression"] for v in spec["variables"])
    binding = by_kind("ValidatingAdmissionPolicyBinding")[POLICY]["spec"]
    assert binding["policyName"] == POLICY and binding["validationActions"] == ["Deny"]
    assert "matchResources" not in binding  # nodes are cluster-scoped: every one of them


def test_the_policy_names_what_the_agent_writes() -> None:
    """The condition types and the annotation, as the code spells them."""
    text = "\n".join(v["expression"] for v in policy()["spec"]["validations"])
    for listed in re.findall(r"c\.type in \[([^\]]*)\]", text):
        assert set(re.findall(r"'([^']+)'", listed)) == set(AGENT_CONDITIONS)
    cordon_marks = {CORDONED_BY, CORDON_REASON, CORDONED_AT, CORDONED_BY_AGENT}
    cordon_marks |= {DO_NOT_DISRUPT, DO_NOT_DISRUPT_SET, DO_NOT_REPAIR, DO_NOT_REPAIR_SET}
    for listed in re.findall(r"k in \[([^\]]*)\]", text):
        published = {RECENT_XIDS, GPU_USE, AGENT_KEY_ANNOTATION}
        assert set(re.findall(r"'([^']+)'", listed)) in (published, cordon_marks)
    assert TAINT["key"] in policy()["spec"]["variables"][1]["expression"]  # its own cordon


async def test_the_writes_the_agent_makes_are_admitted_on_its_own_node_only(
    api: ApiServer,
) -> None:
    """The agent's own adapter writes, applied by the API server (strategic merge and all):
    the node before and after each is what the policy sees."""
    api.objects[NODES, None, "n1"] = kubelets_node()
    marks = kube(api).marks
    writes = [
        (marks.set_conditions, [agent_condition(GPU_PROBLEM), agent_condition(REMEDY_READY)]),
        (marks.set_conditions, [agent_condition(GPU_PROBLEM, "True")]),
        (marks.record_xids, [RecentXid(code=79, gpu="SN-3", at=NOW)]),
        (marks.publish_gpu_use, NodeGpuUse(node="n1", known=False)),  # KubernetesNodeMarks'
        (marks.publish_agent_key, AGENT_KEY),  # what its reports are signed with
        (marks.publish_agent_key, OTHER_KEY),  # a restarted agent's new key
    ]
    for write, what in writes:
        old = api.objects[NODES, None, "n1"]
        await call(write, "n1", what)
        new = api.objects[NODES, None, "n1"]
        assert new != old
        assert refusals(new, old) == []
        assert refusals(new, old, node="n2") == ["remedy-agent on n2 may not change node n1"]


def test_a_change_of_its_own_conditions_is_admitted() -> None:
    old = kubelets_node()
    first = with_conditions(old, condition(GPU_PROBLEM), condition(REMEDY_READY, "True"))
    assert refusals(first, old) == []
    assert refusals(with_conditions(first, condition(GPU_PROBLEM, "True")), first) == []
    xids = changed(first, '[{"code":79}]', "metadata", "annotations", RECENT_XIDS)
    assert refusals(xids, first) == []


@pytest.mark.parametrize(
    ("new", "node", "refused"),
    [
        (with_conditions(kubelets_node("n2"), condition(GPU_PROBLEM, "True")), "n1", "node n2"),
        (with_conditions(kubelets_node(), condition(GPU_PROBLEM, "True")), None, "no node name"),
        (with_conditions(kubelets_node(), condition("Ready", "False")), "n1", "conditions"),
        (changed(kubelets_node(), [], "status", "conditions"), "n1", "conditions"),
        (changed(kubelets_node(), {"nvidia.com/gpu": "0"}, "status", "capacity"), "n1", "status"),
        (changed(kubelets_node(), True, "spec", "unschedulable"), "n1", "spec"),
        (changed(kubelets_node(), "x", "metadata", "labels", "team"), "n1", "labels"),
        (changed(kubelets_node(), None, "metadata", "labels"), "n1", "labels"),
        (changed(kubelets_node(), "x", "metadata", "annotations", "other"), "n1", "annotation"),
        (changed(kubelets_node(), None, "metadata", "annotations"), "n1", "annotation"),
    ],
)
def test_the_agent_may_not_touch_another_node_or_any_field_not_remedys(
    new: Json, node: str | None, refused: str
) -> None:
    old = kubelets_node(new["metadata"]["name"])
    messages = refusals(new, old, node=node)
    assert messages and any(refused in m for m in messages), messages


def test_the_policy_leaves_everyone_else_alone() -> None:
    old = kubelets_node()
    new = changed(old, True, "spec", "unschedulable")  # the controller's cordon
    assert refusals(new, old, user="system:serviceaccount:remedy:remedy-controller") is None
