"""deploy/ for one install: the namespace and service accounts written everywhere a manifest
names them (the agent's admission policy included: a policy that names another account binds
no one, silently), and the agent's DaemonSet given exactly what its features need (needs.py).

deploy/*.yaml are the templates, and the render for the defaults: rendering them with
``Install()`` and ``AgentFeatures()`` gives them back (tests/test_manifests.py). deploy/ itself
is the Helm chart's default render (charts/remedy, `make manifests`); the chart computes the
same privileges in its templates, and tests/test_chart.py checks that it and this renderer
agree for every combination of features. This one needs no helm: `remedy render-manifests`
works from the installed package alone."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workers.manifests.check import agent_problems
from workers.manifests.needs import (
    REBOOT_THROUGH_HOST,
    Mount,
    Needs,
    agent_needs,
    agent_params,
)

Json = dict[str, Any]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# The names deploy/*.yaml are written with.
NAMESPACE, AGENT, CONTROLLER = "remedy", "remedy-agent", "remedy-controller"
AGENT_DAEMONSET, AGENT_POLICY = "remedy-agent", "remedy-agent-own-node"
DEFAULT_KERNEL_LOG = "journal:/var/log/journal"
_FEATURE_FLAGS = {"--kernel-log": 1, "--allow-reset": 0, "--allow-reboot": 0, "--reboot-command": 1}
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # RFC 1123
_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


@dataclass(frozen=True)
class Install:
    """Where remedy runs: its namespace and the service accounts of its two workloads."""

    namespace: str = NAMESPACE
    agent_account: str = AGENT
    controller_account: str = CONTROLLER

    def problems(self) -> list[str]:
        out = [] if _LABEL.match(self.namespace) else [f"namespace {self.namespace!r}"]
        for account in (self.agent_account, self.controller_account):
            out += [] if _SUBDOMAIN.match(account) else [f"service account {account!r}"]
        return [f"{what} is not a valid Kubernetes name" for what in out]


@dataclass(frozen=True)
class AgentFeatures:
    """What the agent may do on its node; each brings its privileges (needs.py)."""

    kernel_log: str = DEFAULT_KERNEL_LOG
    allow_reset: bool = False
    allow_reboot: bool = False

    def args(self) -> list[str]:
        args = ["--kernel-log", self.kernel_log]
        args += ["--allow-reset"] if self.allow_reset else []
        args += (
            ["--allow-reboot", "--reboot-command", REBOOT_THROUGH_HOST] if self.allow_reboot else []
        )
        return args


def agent_user(namespace: str, account: str) -> str:
    """The policy's match: the agent's service account, as the API server names its user."""
    return f"request.userInfo.username == 'system:serviceaccount:{namespace}:{account}'"


def load(directory: Path = DEPLOY) -> list[Json]:
    """The manifests in the folder; ValueError when it holds none (a wrong --deploy must not
    print nothing and succeed) or one is not YAML."""
    docs: list[Json] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    if not docs:
        raise ValueError(f"{directory}: no manifests (*.yaml) there")
    return docs


def render(docs: list[Json], install: Install, features: AgentFeatures) -> list[Json]:
    """The manifests for ``install``, Namespaces first (kubectl applies a stream in order).
    Raises ValueError naming each problem (a bad name, a feature no pod can give its needs)."""
    if wrong := install.problems():
        raise ValueError("; ".join(wrong))
    out = [_placed(copy.deepcopy(doc), install) for doc in docs]
    for doc in out:
        if doc["kind"] == "DaemonSet" and doc["metadata"]["name"] == AGENT_DAEMONSET:
            _give_features(doc, features)
            if wrong := agent_problems(doc):
                raise ValueError("; ".join(wrong))
    return sorted(out, key=lambda d: d["kind"] != "Namespace")


class _Dumper(yaml.SafeDumper):
    """Text of several lines (the policy's CEL) as a block, as a person would write it."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _text)


def dump(docs: list[Json]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=100)


def _placed(doc: Json, install: Install) -> Json:
    accounts = {AGENT: install.agent_account, CONTROLLER: install.controller_account}
    meta = doc["metadata"]
    if meta.get("namespace") == NAMESPACE:
        meta["namespace"] = install.namespace
    if doc["kind"] == "Namespace" and meta["name"] == NAMESPACE:
        meta["name"] = install.namespace
    if doc["kind"] == "ServiceAccount":
        meta["name"] = accounts.get(meta["name"], meta["name"])
    for subject in doc.get("subjects", []):
        if subject["kind"] == "ServiceAccount" and subject.get("namespace") == NAMESPACE:
            subject["namespace"] = install.namespace
            subject["name"] = accounts.get(subject["name"], subject["name"])
    pod = doc.get("spec", {}).get("template", {}).get("spec", {})
    if "serviceAccountName" in pod:
        pod["serviceAccountName"] = accounts.get(
            pod["serviceAccountName"], pod["serviceAccountName"]
        )
    if doc["kind"] == "ValidatingAdmissionPolicy" and meta["name"] == AGENT_POLICY:
        [match] = doc["spec"]["matchConditions"]
        match["expression"] = agent_user(install.namespace, install.agent_account)
    return doc


def _give_features(daemonset: Json, features: AgentFeatures) -> None:
    """The features' flags in the agent's args, and exactly what they need in its pod."""
    pod = daemonset["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c.get("args", [None])[0] == "agent"]
    args, kept, i = container["args"], [], 0
    while i < len(args):  # the template's feature flags out, with their values
        skip = _FEATURE_FLAGS.get(args[i])
        kept += [args[i]] if skip is None else []
        i += 1 + (skip or 0)
    container["args"] = kept + features.args()
    needs = agent_needs(agent_params(container["args"]))  # one that is impossible: checked after
    container["securityContext"] = _security_context(needs)
    pod.pop("hostPID", None)
    if any(n.host_pid for n in needs):
        pod["hostPID"] = True
    _mount(pod, container, [m for n in needs for m in n.mounts])
    env = {k: v for n in needs for k, v in n.env}
    variables = container.setdefault("env", [])
    for variable in variables:
        if variable["name"] in env:
            variable["value"] = env.pop(variable["name"])
    variables += [{"name": k, "value": v} for k, v in env.items()]


def _security_context(needs: list[Needs]) -> Json:
    capabilities = sorted(frozenset().union(*(n.capabilities for n in needs)))
    context: Json = {"runAsUser": 0} if any(n.root for n in needs) else {"runAsNonRoot": True}
    if any(n.privileged for n in needs):
        return context | {"privileged": True}  # every capability, device and AppArmor exemption
    if "SYS_ADMIN" not in capabilities:  # the API server refuses false beside it
        context["allowPrivilegeEscalation"] = False
    context["capabilities"] = {"drop": ["ALL"]} | ({"add": capabilities} if capabilities else {})
    if any(n.unconfined for n in needs):
        context["appArmorProfile"] = {"type": "Unconfined"}
    return context


def _mount(pod: Json, container: Json, wanted: list[Mount]) -> None:
    """The host paths ``wanted`` in place of every hostPath the template had: one mount for a
    path under another wanted one, writable when anything under it must be written."""
    hostpaths = {v["name"] for v in pod.get("volumes", []) if "hostPath" in v}
    tops = [m for m in wanted if not any(o.path != m.path and o.covers(m.path) for o in wanted)]
    volumes, mounts = [], []
    for path in dict.fromkeys(m.path for m in tops):
        kind = next(m.kind for m in tops if m.path == path)
        writable = any(m.writable for m in wanted if Mount(path).covers(m.path))
        name = "host" + path.replace("/", "-")
        volumes.append({"name": name, "hostPath": {"path": path, "type": kind}})
        mounts.append({"name": name, "mountPath": path} | ({} if writable else {"readOnly": True}))
    pod["volumes"] = volumes + [v for v in pod.get("volumes", []) if v["name"] not in hostpaths]
    container["volumeMounts"] = mounts + [
        m for m in container.get("volumeMounts", []) if m["name"] not in hostpaths
    ]
