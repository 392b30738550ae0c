"""The manifests can do what they say: the agent's DaemonSet gives each feature its flags enable
what it needs and nothing more (the agent's args parsed by its own CLI), and deploy/ rendered
for another namespace and service accounts names them everywhere, its admission policy
included."""

from __future__ import annotations

import copy
import itertools
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import ROOT
from tests.processes import Children, descendants
from tests.test_agent_policy import condition as node_condition
from tests.test_agent_policy import kubelets_node, refusals, with_conditions
from workers.cli import app
from workers.manifests.check import agent_problems
from workers.manifests.needs import (
    NSENTER_CAPABILITIES,
    REBOOT_THROUGH_HOST,
    agent_needs,
    agent_params,
)
from workers.manifests.render import (
    AGENT_POLICY,
    AgentFeatures,
    Install,
    dump,
    load,
    render,
)

Json = dict[str, Any]
GPU_OPS = Install("gpu-ops", "gpu-agent", "gpu-controller")
KERNEL_LOGS = ["journal:/var/log/journal", "journal:/run/log/journal", "kmsg"]
KERNEL_LOGS += ["file:/var/log/kern.log", "none"]
FEATURES = [
    AgentFeatures(log, reset, reboot)
    for log, reset, reboot in itertools.product(KERNEL_LOGS, [False, True], [False, True])
]


def named(docs: list[Json]) -> dict[tuple[str, str], Json]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def agent(docs: list[Json]) -> Json:
    return named(docs)["DaemonSet", "remedy-agent"]


def pod(daemonset: Json) -> Json:
    spec: Json = daemonset["spec"]["template"]["spec"]
    return spec


def test_deploy_is_the_render_for_the_defaults() -> None:
    """One place: what the renderer writes for remedy's own names and the default features is
    what deploy/ holds, so `kubectl apply -f deploy/` and a render cannot drift apart."""
    assert named(render(load(), Install(), AgentFeatures())) == named(load())


def test_the_shipped_agent_has_exactly_what_its_flags_need() -> None:
    daemonset = agent(load())
    assert agent_problems(daemonset) == []
    context = pod(daemonset)["containers"][0]["securityContext"]
    assert context == {
        "runAsUser": 0,  # journald's files and the state directory are root's
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "hostPID" not in pod(daemonset)


def test_the_agent_as_shipped_before_could_not_do_what_its_flags_say() -> None:
    """deploy/agent.yaml before issue 27: /dev/kmsg mounted into an unprivileged container
    (its device cgroup refuses it), state a non-root user cannot write, and, once reboots are
    allowed as its comments said, an nsenter into pid 1 without hostPID or capabilities."""
    [before] = yaml.safe_load_all((ROOT / "tests/data/agent-before-issue-27.yaml").read_text())
    found = agent_problems(before)
    assert "the kernel log (--kernel-log auto): auto reads whatever the node lets it" in found[0]
    assert "the state directory /var/lib/remedy (--state-dir) needs runAsUser: 0" in found
    assert "capability SYSLOG: no enabled feature needs it" in found
    assert "hostPath /dev/kmsg: no enabled feature needs it" in found
    pod(before)["containers"][0]["args"].append("--allow-reboot")
    reboot = [p for p in agent_problems(before) if p.startswith("reboots")]
    assert {p.rsplit(" needs ", 1)[1] for p in reboot} == {
        "runAsUser: 0",
        "hostPID: true",
        "appArmorProfile Unconfined",
        *(f"capability {c}" for c in ("SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_PTRACE")),
    }


def test_each_feature_needs_what_its_action_takes_on_a_real_node() -> None:
    """The table's facts, feature by feature (the why is in workers/manifests/needs.py)."""

    def needs(*flags: str) -> dict[str, Any]:
        args = ["agent", "--node", "n", "--kernel-log", "none", "--expected-gpus", "0", *flags]
        [*_, last] = agent_needs(agent_params(args))
        return {k: v for k, v in vars(last).items() if v and k != "feature"}

    reboot = needs("--allow-reboot", "--reboot-command", REBOOT_THROUGH_HOST)
    assert reboot == {
        "root": True,
        "host_pid": True,
        "capabilities": {"SYS_ADMIN", "SYS_PTRACE", "SYS_CHROOT", "SYS_BOOT"},
        "unconfined": True,
    }
    assert needs("--allow-reset") == {"root": True, "privileged": True}
    kmsg = needs("--kernel-log", "kmsg")
    assert kmsg["privileged"] and [m.path for m in kmsg["mounts"]] == ["/dev/kmsg"]
    journal = needs("--kernel-log", "journal:/var/log/journal")
    assert journal.keys() == {"root", "mounts"}  # no capability, nothing privileged
    assert [(m.path, m.writable) for m in journal["mounts"]] == [("/var/log", False)]
    assert "impossible" in needs("--allow-reboot")  # systemctl in a container reaches nothing
    assert "impossible" in needs("--kernel-log", "journal")  # the container's own journal


@pytest.mark.parametrize("features", FEATURES, ids=str)
def test_every_render_grants_exactly_what_its_features_need(features: AgentFeatures) -> None:
    docs = render(load(), Install(), features)
    daemonset = agent(docs)
    assert agent_problems(daemonset) == []
    for doc in docs:
        kubernetes_validate.validate(doc, "1.32.0", strict=True)
    # Exactly: take any one grant away and the check names what is then missing.
    for grant in grants(pod(daemonset)):
        lacking = copy.deepcopy(daemonset)
        take_away(pod(lacking), grant)
        assert agent_problems(lacking), f"{grant} is granted but nothing needs it"


def grants(spec: Json) -> list[tuple[str, str | int]]:
    """Each privilege the agent's pod grants: (where, which)."""
    container = spec["containers"][0]
    context = container["securityContext"]
    out: list[tuple[str, str | int]] = [("pod", "hostPID")] if spec.get("hostPID") else []
    out += [("context", k) for k in ("runAsUser", "privileged", "appArmorProfile") if k in context]
    out += [("capability", c) for c in context.get("capabilities", {}).get("add", [])]
    for i, mount in enumerate(container["volumeMounts"]):
        if mount["name"].startswith("host-"):
            out += [("mount", i)] + ([] if mount.get("readOnly") else [("writable", i)])
    return out


def take_away(spec: Json, grant: tuple[str, str | int]) -> None:
    where, which = grant
    container = spec["containers"][0]
    if where == "pod":
        del spec[which]
    elif where == "context":
        del container["securityContext"][which]
    elif where == "capability":
        container["securityContext"]["capabilities"]["add"].remove(which)
    elif where == "mount":
        del container["volumeMounts"][which]
    else:
        container["volumeMounts"][which]["readOnly"] = True


def test_a_privilege_no_feature_needs_is_named() -> None:
    daemonset = agent(load())
    spec, context = pod(daemonset), pod(daemonset)["containers"][0]["securityContext"]
    spec["hostNetwork"] = spec["hostPID"] = True
    context["capabilities"]["add"] = ["SYS_ADMIN"]
    assert agent_problems(daemonset) == [
        "hostPID: true: no enabled feature needs it",
        "hostNetwork: true: no enabled feature needs it",
        "capability SYS_ADMIN: no enabled feature needs it",
        "allowPrivilegeEscalation: false with privileged or CAP_SYS_ADMIN: the API server "
        "refuses the pod",
    ]


def test_an_undefined_variable_in_the_args_is_named() -> None:
    daemonset = agent(load())
    pod(daemonset)["containers"][0]["args"] += ["--dcgm-host", "$(NODE_IP):5555"]
    assert agent_problems(daemonset) == [
        "$(NODE_IP) in the args: no env NODE_IP defines it (left as it is)"
    ]


def test_a_render_for_gpu_ops_binds_the_policy_to_its_agent() -> None:
    """Installed elsewhere, the policy still holds the agent to its own node: deploy/'s policy
    names remedy's account, which an agent in gpu-ops is not, so it applied to no one."""
    docs = named(render(load(), GPU_OPS, AgentFeatures()))
    user = "system:serviceaccount:gpu-ops:gpu-agent"
    old = kubelets_node("n2")
    new = with_conditions(old, node_condition("GpuProblem", "True"))
    assert refusals(new, old, user=user) is None  # deploy/ as it is: silently off
    policy = docs["ValidatingAdmissionPolicy", AGENT_POLICY]["spec"]
    assert refusals(new, old, user=user, spec=policy) == [
        "remedy-agent on n1 may not change node n2"
    ]
    assert refusals(new, old, user=user, node="n2", spec=policy) == []
    spec = pod(docs["DaemonSet", "remedy-agent"])
    assert docs["DaemonSet", "remedy-agent"]["metadata"]["namespace"] == "gpu-ops"
    assert spec["serviceAccountName"] == "gpu-agent"
    assert ("ServiceAccount", "gpu-agent") in docs and ("Namespace", "gpu-ops") in docs
    binding = docs["ClusterRoleBinding", "remedy-agent"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-agent", "namespace": "gpu-ops"}
    ]
    jobs = docs["RoleBinding", "remedy-controller-jobs"]
    assert jobs["metadata"]["namespace"] == "ml"  # the jobs' namespace stays theirs
    assert jobs["subjects"][0] | {} == {
        "kind": "ServiceAccount",
        "name": "gpu-controller",
        "namespace": "gpu-ops",
    }
    rendered = dump(list(docs.values()))
    assert ":remedy:" not in rendered and "namespace: remedy\n" not in rendered


def schedulable(spec: Json, labels: dict[str, str]) -> bool:
    """Whether the scheduler may place a pod of ``spec`` on a node labelled ``labels``: its
    nodeSelector and its required node affinity (any one term, each expression of it)."""
    if any(labels.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        return False
    required = spec.get("affinity", {}).get("nodeAffinity", {})
    terms = required.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    if "nodeSelectorTerms" not in terms:
        return True
    return any(
        all(holds(e, labels) for e in t["matchExpressions"]) for t in terms["nodeSelectorTerms"]
    )


def holds(expression: Json, labels: dict[str, str]) -> bool:
    key: str = expression["key"]
    operator: str = expression["operator"]
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    values: list[str] = expression["values"]
    inside = key in labels and labels[key] in values
    if operator in ("In", "NotIn"):
        return inside == (operator == "In")
    raise AssertionError(f"no test evaluates {operator}")


def node_labels(spec: Json) -> list[dict[str, str]]:
    """Every way a node can be labelled for the keys ``spec`` selects on: absent, each value
    the spec names, and one it does not."""
    named: dict[str, set[str]] = {k: {v} for k, v in spec.get("nodeSelector", {}).items()}
    required = spec.get("affinity", {}).get("nodeAffinity", {})
    terms = required.get("requiredDuringSchedulingIgnoredDuringExecution", {})
    for term in terms.get("nodeSelectorTerms", []):
        for expression in term["matchExpressions"]:
            named.setdefault(expression["key"], set()).update(expression.get("values", []))
    ways = [[(k, None), *((k, v) for v in sorted(vs | {"other"}))] for k, vs in named.items()]
    return [{k: v for k, v in way if v is not None} for way in itertools.product(*ways)]


@pytest.mark.parametrize("install", [Install(), GPU_OPS], ids=["remedy", "gpu-ops"])
def test_the_controller_never_runs_where_an_agent_does(install: Install) -> None:
    """An agent rendered to reset or reboot reaches the host's files, every pod's Secret
    volumes included: beside it, the controller's Temporal credentials and codec key would be
    the node's. Its Deployment is required off every node the agent's DaemonSet selects (read
    from agent.yaml, so a change of the agent's nodes moves the controller too) and off any
    node where an agent pod runs."""
    docs = named(render(load(), install, AgentFeatures(allow_reset=True, allow_reboot=True)))
    agents = docs["DaemonSet", "remedy-agent"]
    controller = docs["Deployment", "remedy-controller"]
    agent_spec, spec = pod(agents), controller["spec"]["template"]["spec"]
    ways = node_labels(agent_spec) + node_labels(spec)
    assert any(schedulable(agent_spec, labels) for labels in ways)
    for labels in ways:
        assert schedulable(spec, labels) != schedulable(agent_spec, labels), labels
    [term] = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    agent_labels = agents["spec"]["template"]["metadata"]["labels"]
    assert term["labelSelector"]["matchLabels"].items() <= agent_labels.items()
    assert term["labelSelector"]["matchLabels"] != controller["spec"]["selector"]["matchLabels"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    # No namespaces: the controller's own, which is the agent's in every render.
    assert "namespaces" not in term and "namespaceSelector" not in term
    assert agents["metadata"]["namespace"] == controller["metadata"]["namespace"]


def test_render_manifests_prints_a_stream_kubectl_can_apply() -> None:
    args = ["render-manifests", "--namespace", "gpu-ops", "--agent-service-account", "gpu-agent"]
    result = CliRunner().invoke(app, [*args, "--allow-reboot"])
    assert result.exit_code == 0, result.output
    docs = [d for d in yaml.safe_load_all(result.output) if d]
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-ops"}}
    daemonset = agent(docs)
    assert agent_problems(daemonset) == [] and pod(daemonset)["hostPID"] is True
    assert agent_params(pod(daemonset)["containers"][0]["args"])["reboot_command"] == (
        REBOOT_THROUGH_HOST
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--namespace", "GPU_ops"], "namespace 'GPU_ops' is not a valid Kubernetes name"),
        (["--agent-service-account", "a b"], "service account 'a b' is not a valid"),
        (["--kernel-log", "auto"], "name the source (journal:DIR, kmsg, file:PATH)"),
    ],
)
def test_render_manifests_refuses_what_it_cannot_render(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["render-manifests", *args])
    assert result.exit_code == 1 and said in result.output, result.output


@pytest.mark.server
def test_nsenter_into_pid_1_needs_each_capability_the_table_grants(processes: Children) -> None:
    """The reboot's nsenter, tried: into a process in namespaces of its own (standing in for
    the host's pid 1, with every capability) it works with the table's capabilities and fails
    with any one of them left out. Needs root, unshare, setpriv and nsenter."""
    tools = ("unshare", "setpriv", "nsenter")
    if os.geteuid() != 0 or not all(shutil.which(t) for t in tools):
        pytest.skip("needs root and util-linux's unshare, setpriv and nsenter")
    # unshare forks the child that lives in the new namespaces; its line says it is there.
    ready = "echo ready; exec sleep 120"
    holder = processes.start(
        ["unshare", "--mount", "--uts", "--ipc", "--net", "--pid", "--fork", "sh", "-c", ready],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
    [target] = [p.pid for p in descendants(holder.pid) if p.ppid == holder.pid]
    words = REBOOT_THROUGH_HOST.split()
    enter = [w if w != "1" else str(target) for w in words[: words.index("--")]]

    def tried(capabilities: frozenset[str]) -> int:
        bounding = ",".join(["-all", *(f"+{c.lower()}" for c in sorted(capabilities))])
        drop = ["setpriv", "--inh-caps=-all", f"--bounding-set={bounding}", "--"]
        return processes.run([*drop, *enter, "--", "true"], timeout=30).returncode

    try:
        assert tried(NSENTER_CAPABILITIES) == 0
        for left_out in sorted(NSENTER_CAPABILITIES):
            assert tried(NSENTER_CAPABILITIES - {left_out}) != 0, left_out
    finally:
        os.kill(target, signal.SIGKILL)  # the new namespace's pid 1 ignores SIGTERM


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_render_manifests_refuses_a_deploy_folder_with_nothing_to_render(
    tmp_path: Path, where: str
) -> None:
    folder = tmp_path / where
    if where == "empty":
        folder.mkdir()
    result = CliRunner().invoke(app, ["render-manifests", "--deploy", str(folder)])
    assert result.exit_code == 1, result.output
    assert result.output == f"error: {folder}: no manifests (*.yaml) there\n"
