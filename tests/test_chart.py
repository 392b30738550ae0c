"""The Helm chart (charts/remedy) is the one source of deploy/: its default render is deploy/,
it gives the agent the privileges the Python renderer does for every combination of features
(both read needs.py's table: the chart through its copy, _agent.tpl), every flag of the agent
and the controller is one of its values, its monitor mode acts on nothing, and every object it
renders is valid against the Kubernetes OpenAPI schemas."""

from __future__ import annotations

import json
import subprocess
import typing
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kubeapi.schema import VERSION
from tests.chart import Json, named, refusal, render
from tests.test_manifests import FEATURES, GPU_OPS, agent, pod
from workers.cli.controller_flags import ControllerFlags
from workers.flags import parse
from workers.flags.agent import AgentFlags
from workers.manifests import chart
from workers.manifests.check import agent_problems
from workers.manifests.needs import agent_params
from workers.manifests.render import AgentFeatures, Install, load
from workers.manifests.render import render as python_render

pytestmark = pytest.mark.server  # helm is a child process

VALUES: Json = yaml.safe_load((chart.CHART / "values.yaml").read_text())
# Flags that are no value of the chart, and why.
NOT_VALUES = {
    "node": "the pod's node, from the downward API ($(NODE_NAME))",
    "namespace": "the release's namespace (POD_NAMESPACE, from the downward API)",
    "address": "temporal.address (TEMPORAL_ADDRESS in the Temporal ConfigMap)",
    "kubeconfig": "in the cluster, the pod's service account",
}
# Everything on: every template renders something.
EVERYTHING: Json = {
    "agent": {"flags": {"kernelLog": "kmsg", "allowReset": True, "allowReboot": True}},
    "runbooks": {"configMap": True, "files": {"extra.yaml": "name: extra\n"}},
    "codec": {"enabled": True, "server": {"enabled": True, "tokenSecret": "codec-token"}},
    "monitoring": {k: {"enabled": True} for k in ("prometheusRule", "serviceMonitor", "dashboard")},
}
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}  # the Prometheus Operator's CRDs


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def test_deploy_is_the_charts_default_render() -> None:
    """One source: deploy/*.yaml are the chart's templates rendered with its defaults, file by
    file (make manifests), so `kubectl apply -f deploy/` and `helm install` install the same."""
    text = chart.template()
    assert named(chart.objects(text)) == named(load())
    files = chart.by_template(text)
    assert sorted(files) == sorted(p.name for p in chart.DEPLOY.glob("*.yaml"))
    for name, rendered in files.items():
        on_disk = (chart.DEPLOY / name).read_text()
        assert on_disk.startswith(chart.HEADER)
        assert chart.objects(on_disk) == chart.objects(rendered), f"{name}: run make manifests"


def features_values(features: AgentFeatures, install: Install) -> Json:
    flags = {"kernelLog": features.kernel_log}
    flags |= {"allowReset": features.allow_reset, "allowReboot": features.allow_reboot}
    return {
        "agent": {"flags": flags, "serviceAccount": install.agent_account},
        "controller": {"serviceAccount": install.controller_account},
    }


@pytest.mark.parametrize(
    ("features", "install"),
    [(f, Install()) for f in FEATURES] + [(AgentFeatures(allow_reboot=True), GPU_OPS)],
    ids=str,
)
def test_the_chart_renders_what_render_manifests_does(
    features: AgentFeatures, install: Install, tmp_path: Path
) -> None:
    """`remedy render-manifests` (Python, from deploy/) and the chart agree object for object:
    the agent's privileges for each combination of features, the names of another install."""
    values = features_values(features, install)
    docs = render(values, namespace=install.namespace, tmp=tmp_path)
    assert named(docs) == named(python_render(load(), install, features))
    assert agent_problems(agent(docs)) == []


@pytest.mark.parametrize(
    "flags",
    [
        {"stateDir": "/data/remedy", "cursor": "/data/cursor/kernel.cursor"},
        {"kernelLog": "file:/var/log/kern.log", "podResources": "", "expectedGpus": 0},
        {"kernelLog": "journal:/run/log/journal", "cursor": None, "kubernetes": False},
        {"kernelLog": "kmsg", "stateDir": "/var/lib/remedy/agent", "allowReboot": True},
    ],
    ids=str,
)
def test_other_paths_get_exactly_what_they_need(flags: Json, tmp_path: Path) -> None:
    """The flags render-manifests does not vary (where state, the cursor and the kubelet's
    socket live): the chart's DaemonSet still passes the check of needs.py's table."""
    docs = render({"agent": {"flags": flags}}, tmp=tmp_path)
    assert agent_problems(agent(docs)) == []


def test_a_feature_no_pod_can_serve_is_refused(tmp_path: Path) -> None:
    said = refusal({"agent": {"flags": {"kernelLog": "auto"}}}, tmp=tmp_path)
    assert "name the source (journal:DIR, kmsg, file:PATH)" in said
    reboot = {"allowReboot": True, "rebootCommand": "systemctl reboot"}
    assert "reaches no systemd of the host" in refusal({"agent": {"flags": reboot}}, tmp=tmp_path)
    assert "monitor or remediate" in refusal({"mode": "watch"}, tmp=tmp_path)


def renders() -> dict[str, Json]:
    return {"defaults": {}, "monitor": {"mode": "monitor"}, "everything": EVERYTHING}


@pytest.mark.parametrize("which", list(renders()))
def test_every_object_is_valid_against_the_openapi_schemas(which: str, tmp_path: Path) -> None:
    docs = render(renders()[which], tmp=tmp_path)
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["spec"]
            continue
        kubernetes_validate.validate(doc, VERSION, strict=True)
    kinds = {d["kind"] for d in docs}
    if which == "everything":
        assert {"Service", "ServiceMonitor", "PrometheusRule", "ConfigMap"} <= kinds


def test_monitor_mode_publishes_conditions_and_acts_on_nothing(tmp_path: Path) -> None:
    """The safe first install: no controller (nothing climbs a ladder, nothing has its rights),
    and agents that read and publish but cordon, reset and reboot nothing, even with the
    features asked for: no privilege beyond reading their node."""
    asked = {"allowReset": True, "allowReboot": True}
    docs = named(render({"mode": "monitor", "agent": {"flags": asked}}, tmp=tmp_path))
    assert not any(kind == "Deployment" for kind, _ in docs)
    accounts = {s["name"] for d in docs.values() for s in d.get("subjects", [])}
    assert accounts == {"remedy-agent"}
    writes = {
        (resource, verb)
        for (kind, _), d in docs.items()
        if kind in ("ClusterRole", "Role")
        for rule in d["rules"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        if verb not in ("get", "list", "watch")
    }
    # The agent's own: its node's conditions and annotations (its own node only, by the
    # admission policy), and Events.
    assert writes == {("nodes", "patch"), ("nodes/status", "patch"), ("events", "create")}
    daemonset = docs["DaemonSet", "remedy-agent"]
    container = pod(daemonset)["containers"][0]
    params = agent_params(container["args"])
    assert params["self_cordon"] is False and params["dry_run"] is True
    assert not params["allow_reset"] and not params["allow_reboot"]
    assert container["securityContext"] == {
        "runAsUser": 0,  # journald's files and the state directory are root's
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert "hostPID" not in pod(daemonset)
    assert agent_problems(daemonset) == []
    assert ("ValidatingAdmissionPolicy", "remedy-agent-own-node") in docs


def flag_names(model: type[Any]) -> set[str]:
    return {camel(name) for name in model.model_fields if name not in NOT_VALUES}


@pytest.mark.parametrize("role", ["agent", "controller"])
def test_every_flag_is_a_value(role: str) -> None:
    """Each option of `remedy agent` and `remedy controller` is a key of values.yaml (named
    after it, commented with its help), and each key is an option."""
    model = AgentFlags if role == "agent" else ControllerFlags
    assert set(VALUES[role]["flags"]) == flag_names(model)
    text = (chart.CHART / "values.yaml").read_text()
    for name in model.model_fields:
        if name not in NOT_VALUES:
            assert f"# --{name.replace('_', '-')}: " in text, f"{name}: no comment"


def sample(model: type[Any], name: str) -> Any:
    """A value the command accepts for the flag ``name``."""
    field = model.model_fields[name]
    special = {"drain_mode": ["ml=immediate"], "active_check_pool": ["training=12h/3d"]}
    special |= {"monitor_conditions": ["/etc/monitors.yaml"], "pool_runbooks": ["/etc/pools"]}
    special |= {"fabric_test": ["nvbandwidth"], "kernel_log": "kmsg", "metrics_bind": "0.0.0.0:1"}
    if name in special:
        return special[name]
    if field.default is not None and not isinstance(field.default, bool):
        return str(field.default) if isinstance(field.default, Path) else field.default
    hint = typing.get_type_hints(model, include_extras=True)[name]
    kind = typing.get_args(typing.get_args(hint)[0]) or (typing.get_args(hint)[0],)
    if bool in kind:
        return not field.default
    return {int: 2, float: 2.5, str: "x", Path: "/x"}[kind[0]]


@pytest.mark.parametrize("role", ["agent", "controller"])
def test_each_value_reaches_its_flag(role: str, tmp_path: Path) -> None:
    """Every flag set at once: the container's command line, parsed by the command's own
    parser, has each value (a key that named no flag would be a usage error here)."""
    model = AgentFlags if role == "agent" else ControllerFlags
    names = [n for n in model.model_fields if n not in NOT_VALUES]
    flags = {camel(n): sample(model, n) for n in names}
    if role == "agent":
        flags["rebootCommand"] = VALUES["agent"]["flags"]["rebootCommand"]  # one pods can serve
    docs = named(render({role: {"flags": flags}}, tmp=tmp_path))
    workload = docs["DaemonSet" if role == "agent" else "Deployment", f"remedy-{role}"]
    args = pod(workload)["containers"][0]["args"]
    parsed = parse(model, args[1:], role)
    for name in names:
        got = parsed[name]
        got = [str(g) for g in got] if isinstance(got, list | tuple) else got
        got = str(got) if isinstance(got, Path) else got
        assert got == flags[camel(name)], name


def test_temporal_settings_and_credentials(tmp_path: Path) -> None:
    values = {"temporal": {"address": "t.example:7233", "namespace": "fleet", "tls": False}}
    values["temporal"] |= {"serverName": "t.internal", "agentSecret": "a-creds"}
    docs = named(render(values, tmp=tmp_path))
    assert docs["ConfigMap", "remedy-temporal"]["data"] == {
        "TEMPORAL_ADDRESS": "t.example:7233",
        "TEMPORAL_NAMESPACE": "fleet",
        "TEMPORAL_TLS_SERVER_NAME": "t.internal",
    }
    spec = pod(docs["DaemonSet", "remedy-agent"])
    [credentials] = [v for v in spec["volumes"] if v["name"] == "temporal-credentials"]
    assert credentials["secret"]["secretName"] == "a-creds"
    [key] = [e for e in spec["containers"][0]["env"] if e["name"] == "TEMPORAL_API_KEY"]
    assert key["valueFrom"]["secretKeyRef"] == {
        "name": "a-creds",
        "key": "api-key",
        "optional": True,
    }


def test_runbooks_codec_server_and_monitoring(tmp_path: Path) -> None:
    docs = named(render(EVERYTHING, tmp=tmp_path))
    # charts/remedy/runbooks links to runbooks/: one copy of each, rendered byte for byte.
    data = docs["ConfigMap", "remedy-runbooks"]["data"]
    shipped = {p.name: p.read_text() for p in chart.RUNBOOKS.glob("*.yaml")}
    assert data == shipped | {"extra.yaml": "name: extra\n"}
    for kind, name in (("DaemonSet", "remedy-agent"), ("Deployment", "remedy-controller")):
        container = pod(docs[kind, name])["containers"][0]
        args = container["args"]
        assert args[args.index("--runbooks") + 1] == "/etc/remedy/runbooks"
        assert {"name": "runbooks", "mountPath": "/etc/remedy/runbooks", "readOnly": True} in (
            container["volumeMounts"]
        )
    controller = pod(docs["Deployment", "remedy-controller"])["containers"][0]
    assert {"name": "REMEDY_CODEC_KEY_FILE", "value": "/etc/remedy/codec/codec.key"} in (
        controller["env"]
    )
    server = pod(docs["Deployment", "remedy-codec-server"])["containers"][0]
    assert server["args"][:3] == ["codec-server", "--key-file", "/etc/remedy/codec/codec.key"]
    assert docs["Service", "remedy-codec-server"]["spec"]["ports"][0]["port"] == 8888
    monitor = docs["ServiceMonitor", "remedy"]["spec"]
    for component in ("agent", "controller"):
        service = docs["Service", f"remedy-{component}-metrics"]
        assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert service["spec"]["ports"][0]["port"] == 9464
    files = chart.CHART / "files"
    rules = yaml.safe_load((files / "remedy-alerts.rules.yaml").read_text())
    assert docs["PrometheusRule", "remedy-alerts"]["spec"] == rules  # the file promtool tests
    dashboard = docs["ConfigMap", "remedy-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["remedy.json"]) == json.loads(
        (files / "dashboard.json").read_text()
    )
    no_token = EVERYTHING | {"codec": {"server": {"enabled": True}}}
    assert "every request must carry a token" in refusal(no_token, tmp=tmp_path)


def test_helm_lints_the_chart() -> None:
    for mode in ("remediate", "monitor"):
        done = subprocess.run(
            [str(chart.helm()), "lint", "--strict", str(chart.CHART), "--set", f"mode={mode}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
