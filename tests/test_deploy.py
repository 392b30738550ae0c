"""The Kubernetes manifests parse, hang together, and grant exactly the API calls remedy makes:
the calls are derived by running the adapter against the strict API server (kubeapi), not listed
by hand — cluster-wide, or in the namespace a namespaced Role covers."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client as k8s

from adapters.kubernetes.admission import ADMISSION_TAINT
from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.control import TAINT
from adapters.kubernetes.fabric_jobs import FabricImages
from adapters.kubernetes.jobs import KubernetesJobs
from adapters.kubernetes.objects import AGENT_MANAGER
from kubeapi import ApiServer
from remedy.acting.gpu_use import NodeGpuUse
from remedy.attribution.evidence import RecentXid
from remedy.core.models import Finding, NodeRef, Severity
from remedy.detection.conditions import NodeCondition
from remedy.detection.fabric.verdict import FabricTest
from remedy.disruption.quarantine import BreakerState
from remedy.scan.cluster import CordonOwner, OwnNode
from remedy.scan.fabric import FabricRun
from tests.conftest import ROOT
from tests.kube import DAEMONSETS, JOBS, NODECLAIMS, NODES, PODS, call, daemonset, node, pod
from tests.test_gpu_use import CLAIMS, SLICES, claim, dra_pod, gpu_slice
from tests.test_kubernetes_jobs import failed_job, job_pod
from workers.agent import cordon_own_node
from workers.manifests.needs import agent_params
from workers.manifests.render import AgentFeatures, Install, load, render

Rule = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def manifests() -> list[dict[str, Any]]:
    return load(ROOT / "deploy")


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in manifests() if d["kind"] == kind}


def _rules(role: dict[str, Any]) -> set[Rule]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def granted(role: str) -> set[Rule]:
    return _rules(by_kind("ClusterRole")[role])


def granted_per_namespace(account: str) -> dict[str, set[Rule]]:
    """What RoleBindings grant ``account`` in their own namespace, by namespace."""
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in manifests_of("Role")}
    out: dict[str, set[Rule]] = {}
    for binding in manifests_of("RoleBinding"):
        if account in {s["name"] for s in binding["subjects"]}:
            namespace = binding["metadata"]["namespace"]
            role = roles[namespace, binding["roleRef"]["name"]]
            out.setdefault(namespace, set()).update(_rules(role))
    return out


def manifests_of(kind: str) -> list[dict[str, Any]]:
    return [d for d in manifests() if d["kind"] == kind]


def namespace_of(path: str) -> str | None:
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    return rest[1] if rest[:1] == ["namespaces"] and len(rest) > 2 else None


def rule_of(method: str, path: str) -> Rule:
    parts = [p for p in path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {
        "GET": "get" if named else "list",
        "PATCH": "patch",
        "PUT": "update",
        "POST": "create",
        "DELETE": "delete",
    }[method]
    return group, resource, verb


async def calls_made(
    api: ApiServer, scenario: Callable[[k8s.ApiClient], None]
) -> set[tuple[str | None, Rule]]:
    """Each call the scenario made: the namespace it was made in (None: cluster-wide) and the
    rule it needs."""
    await call(scenario, api.client())
    return {(namespace_of(r.path), rule_of(r.method, r.path)) for r in api.requests}


def ungranted_and_unused(
    calls: set[tuple[str | None, Rule]], cluster: set[Rule], namespaced: dict[str, set[Rule]]
) -> tuple[set[tuple[str | None, Rule]], set[tuple[str | None, Rule]]]:
    """Calls no role grants, and grants no call uses (a namespaced grant must be used in its
    own namespace)."""
    ungranted = {
        (ns, rule)
        for ns, rule in calls
        if rule not in cluster and (ns is None or rule not in namespaced.get(ns, set()))
    }
    used = {rule for _, rule in calls}
    unused: set[tuple[str | None, Rule]] = {(None, rule) for rule in cluster - used}
    unused |= {(ns, r) for ns, rules in namespaced.items() for r in rules if (ns, r) not in calls}
    return ungranted, unused


def controller_scenario(api: k8s.ApiClient) -> None:
    """Wired as `remedy controller` wires it."""
    cluster = kubernetes_cluster(api, eviction_retry_s=0.01, checkpoint_grace_s=0.05)
    jobs = KubernetesJobs(api)
    owner = CordonOwner("wf", "test")
    cluster.control.cordon("n1", owner)
    cluster.control.restore("n1")
    cluster.control.kill_gpu_pods("n1", "key-1")
    cluster.control.drain(
        "n2", lambda left: None, "key-2"
    )  # asks "ckpt" to checkpoint, then evicts
    cluster.gpus.release_gpus("n1")
    cluster.gpus.return_gpus("n1")
    cluster.control.node_boot("n1")
    cluster.fleet.pool_size("gpu")
    assert cluster.workload is not None
    cluster.workload.gpu_pods("n3")  # its DRA pod's claim, and the slice with its GPU
    gpus = cluster.gpu_scope  # a GPU-scoped drain: a DRA device taint, the GPU's pod evicted
    assert gpus is not None
    gpus.evict_gpu_pods("n3", [3], "key-3", kill=False, owner="wf")
    gpus.lift_quarantine("n3", "wf")  # the ladder's restore deletes its rule
    gpus.evict_gpu_pods("n3", [5], "key-5", kill=False, owner="wf")
    gpus.release_gpu("n3", 5)  # `remedy release-gpu`
    cluster.fleet.nodes()  # the fleet scan
    assert cluster.breakers is not None  # a budget publishes its breaker; a cordon reads it
    cluster.breakers.publish("gpu", BreakerState.NEAR)  # the first: created
    cluster.breakers.publish("gpu", BreakerState.CLOSED)
    cluster.breakers.holding(["gpu"])
    cluster.admission.hold_for_admission("n2")
    cluster.admission.admit("n2", ["SN1"])
    cluster.admission.reject("n2", "failed")
    # healthy after a verified ladder
    cluster.marks.set_conditions("n1", cluster.marks.conditions("n1"))
    cluster.replacer.replace("n1", "")  # auto, a Karpenter node: get its NodeClaim, delete it
    cluster.replacer.replace("n4", "")  # no owner reference: list NodeClaims for its providerID
    kubernetes_cluster(api, replacer="plain").replacer.replace("n1", "")  # plain: delete the Node
    # The job watch and the guards: failed pods with their log, then restart and stop.
    [failure] = jobs.failed_pods()
    jobs.mark_reported(failure, "job-guard/ml/llm")
    jobs.restart_job(failure.job, 1, "platform fault")  # the Job failed: recreate it
    jobs.stop_job(failure.job, "application fault")  # the copy runs: suspend it
    jobs.job_state(failure.job)
    # The fabric tests (--fabric-test): a loopback Job in remedy's namespace, read, removed.
    images = FabricImages(nccl_tests="nccl", nvbandwidth="nvb", perftest="perftest")
    fabric = kubernetes_cluster(api, namespace="remedy", fabric_images=images).fabric
    assert fabric is not None
    loopback = FabricRun(run_id="r1", test=FabricTest.NCCL_LOOPBACK, nodes=["n1"], gpus=8)
    fabric.outcome(fabric.start(loopback.model_copy(update={"model": "H100"})))
    fabric.remove(loopback)


def agent_scenario(api: k8s.ApiClient) -> None:
    """Wired as `remedy agent --kubernetes` wires it: the node marks only."""
    marks = kubernetes_cluster(api).marks
    previous = marks.conditions("n1")
    marks.set_conditions(
        "n1",
        previous
        or [
            NodeCondition(
                type="GpuProblem",
                status="False",
                reason="NoGpuProblem",
                message="ok",
                last_heartbeat_time=NOW,
                last_transition_time=NOW,
            )
        ],
    )
    marks.record_xids("n1", [RecentXid(code=13, gpu="SN1", at=NOW, pid=1, process="python")])
    marks.publish_gpu_use("n1", NodeGpuUse(node="n1"))  # which pod uses which GPU
    on = kubernetes_cluster(api, field_manager=AGENT_MANAGER)  # its own cordon, breakers read
    assert on.breakers is not None
    finding = Finding(
        node="n1", check="xid", reason="Xid79", severity=Severity.CRITICAL, observed_at=NOW
    )
    cordon_own_node(OwnNode(on.control, on.breakers), NodeRef(name="n1", pool="gpu"), finding)


def seed(api: ApiServer) -> None:
    api.objects["v1/namespaces", None, "remedy"] = {"metadata": {"name": "remedy"}}
    n1, n4 = (node(name, labels={"karpenter.sh/nodepool": "gpu"}) for name in ("n1", "n4"))
    n1["metadata"]["ownerReferences"] = [  # Karpenter's NodeClaim owns the node it registered
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "claim", "uid": "c1"}
    ]
    n4["spec"]["providerID"] = "aws:///us-east-1a/i-4"
    api.objects[NODES, None, "n1"], api.objects[NODES, None, "n4"] = n1, n4
    api.objects[PODS, "jobs", "train"] = pod("train", gpus=8)  # killed by kill_job
    api.objects[NODES, None, "n2"] = node("n2")
    api.objects[PODS, "jobs", "web"] = pod("web", node_name="n2")  # evicted by the drain
    api.objects[PODS, "jobs", "ckpt"] = pod("ckpt", node_name="n2", gpus=1)  # + checkpoint
    # Left by the drain once it has seen its DaemonSet exists.
    api.objects[PODS, "jobs", "agent"] = pod("agent", node_name="n2", owner="DaemonSet")
    api.objects[DAEMONSETS, "jobs", "o"] = daemonset()
    api.objects[NODECLAIMS, None, "claim"] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "claim"},
        "status": {"nodeName": "n1"},
    }
    api.objects[NODECLAIMS, None, "claim-4"] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "claim-4"},
        "status": {"nodeName": "n4", "providerID": "aws:///us-east-1a/i-4"},
    }
    api.objects[NODES, None, "n3"] = node("n3")
    api.objects[PODS, "ml", "llm-0"] = job_pod("llm-0", "n3")
    api.objects[JOBS, "ml", "llm"] = failed_job()
    api.logs["ml", "llm-0"] = "Traceback"
    api.objects[CLAIMS, "jobs", "c3"] = claim("c3", "gpu-3")
    api.objects[SLICES, None, "n3-gpus"] = gpu_slice("n3")
    api.objects[PODS, "jobs", "dra"] = dra_pod("dra", "c3", node_name="n3")


async def test_controller_roles_grant_exactly_what_the_adapter_calls(
    api: ApiServer,
) -> None:
    seed(api)
    calls = await calls_made(api, controller_scenario)
    cluster, namespaced = granted("remedy-controller"), granted_per_namespace("remedy-controller")
    assert ungranted_and_unused(calls, cluster, namespaced) == (set(), set())
    # The guarded job's, and the fabric tests' in remedy's own.
    assert {ns for ns, (group, _, _) in calls if group == "batch"} == {"ml", "remedy"}


def test_the_controllers_job_rights_are_granted_per_namespace_never_cluster_wide() -> None:
    namespaced = granted_per_namespace("remedy-controller")
    job_rights = {r for r in granted("remedy-controller") if r[0] == "batch"}
    assert not job_rights  # no Job rights in any namespace that did not opt in
    assert namespaced["ml"] == {("batch", "jobs", v) for v in ("get", "list", "create", "patch")}
    # In its own namespace: the breakers it publishes (one ConfigMap), and the fabric tests'
    # Jobs (made, read, removed; never changed).
    assert namespaced["remedy"] == {("", "configmaps", v) for v in ("get", "create", "patch")} | {
        ("batch", "jobs", v) for v in ("get", "create", "delete")
    }
    assert set(namespaced) == {"ml", "remedy"}
    assert "kube-system" not in namespaced
    for binding in by_kind("ClusterRoleBinding").values():
        assert binding["roleRef"]["kind"] == "ClusterRole"
        assert "remedy-controller-jobs" != binding["roleRef"]["name"]


async def test_agent_role_grants_exactly_what_the_agent_calls(
    api: ApiServer,
) -> None:
    seed(api)
    calls = await calls_made(api, agent_scenario)
    cluster, namespaced = granted("remedy-agent"), granted_per_namespace("remedy-agent")
    assert ungranted_and_unused(calls, cluster, namespaced) == (set(), set())
    assert namespaced == {"remedy": {("", "configmaps", "get")}}  # the breakers, read only


@pytest.mark.parametrize("version", ["1.32.0", kubernetes_validate.latest_version()])
def test_every_manifest_is_valid_kubernetes(version: str) -> None:
    """Against the API's own schemas, unknown fields refused: a misspelt field of the admission
    policy would otherwise be dropped by the server, silently. 1.32: the policy needs the
    node name in service account tokens, GA there."""
    for doc in manifests():
        kubernetes_validate.validate(doc, version, strict=True)


def test_manifests_parse_and_reference_each_other() -> None:
    docs = manifests()
    assert all({"apiVersion", "kind", "metadata"} <= d.keys() for d in docs)
    accounts = set(by_kind("ServiceAccount"))
    roles = set(by_kind("ClusterRole"))
    for binding in by_kind("ClusterRoleBinding").values():
        assert binding["roleRef"]["name"] in roles
        assert {s["name"] for s in binding["subjects"]} <= accounts
    namespaced_roles = {
        (d["metadata"]["namespace"], d["metadata"]["name"]) for d in manifests_of("Role")
    }
    for binding in manifests_of("RoleBinding"):
        ref = (binding["metadata"]["namespace"], binding["roleRef"]["name"])
        assert binding["roleRef"]["kind"] == "Role" and ref in namespaced_roles
        assert {s["name"] for s in binding["subjects"]} <= accounts
    for workload in [*by_kind("Deployment").values(), *by_kind("DaemonSet").values()]:
        spec = workload["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        assert spec["template"]["spec"]["serviceAccountName"] in accounts
        assert spec["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]


def test_agent_runs_on_gpu_nodes_only_and_tolerates_remedys_own_taints() -> None:
    agent = by_kind("DaemonSet")["remedy-agent"]["spec"]["template"]["spec"]
    assert agent["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    # A cordoned node still needs its agent, and a new node needs it for admission.
    assert {t["key"] for t in agent["tolerations"]} >= {
        "nvidia.com/gpu",
        TAINT["key"],
        ADMISSION_TAINT["key"],
    }
    args = agent["containers"][0]["args"]
    assert "--allow-reset" not in args and "--allow-reboot" not in args  # off by default


def test_the_agents_args_are_what_the_agent_takes_and_its_reboot_reaches_the_host() -> None:
    """Parsed by the real CLI: a flag the agent lacks fails here, not on the fleet. A render
    that allows reboots enters the host's namespaces (tests/test_manifests.py: with what)."""
    agent = by_kind("DaemonSet")["remedy-agent"]["spec"]["template"]["spec"]
    assert agent_params(agent["containers"][0]["args"])["kernel_log"] == "journal:/var/log/journal"
    [rendered] = [
        d
        for d in render(manifests(), Install(), AgentFeatures(allow_reboot=True))
        if d["kind"] == "DaemonSet"
    ]
    params = agent_params(rendered["spec"]["template"]["spec"]["containers"][0]["args"])
    assert params["allow_reboot"] and shlex.split(params["reboot_command"]) == [
        *("nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--"),
        *("systemctl", "reboot"),
    ]


@pytest.mark.parametrize(
    ("method", "path", "rule"),
    [
        ("GET", "/api/v1/nodes/n1", ("", "nodes", "get")),
        ("GET", "/api/v1/pods", ("", "pods", "list")),
        ("PATCH", "/api/v1/nodes/n1/status", ("", "nodes/status", "patch")),
        ("POST", "/api/v1/namespaces/jobs/pods/p/eviction", ("", "pods/eviction", "create")),
        ("POST", "/api/v1/namespaces/default/events", ("", "events", "create")),
        ("GET", "/api/v1/namespaces/ml/pods/p/log", ("", "pods/log", "get")),
        ("POST", "/apis/batch/v1/namespaces/ml/jobs", ("batch", "jobs", "create")),
        ("DELETE", "/apis/karpenter.sh/v1/nodeclaims/c", ("karpenter.sh", "nodeclaims", "delete")),
        (
            "POST",
            "/apis/resource.k8s.io/v1beta2/devicetaintrules",
            ("resource.k8s.io", "devicetaintrules", "create"),
        ),
        (
            "DELETE",
            "/apis/resource.k8s.io/v1beta2/devicetaintrules/r",
            ("resource.k8s.io", "devicetaintrules", "delete"),
        ),
    ],
)
def test_request_paths_map_to_rbac_rules(method: str, path: str, rule: Rule) -> None:
    assert rule_of(method, path) == rule


def test_rbac_file_is_where_the_readme_says() -> None:
    assert Path(ROOT / "deploy" / "rbac.yaml").exists()
