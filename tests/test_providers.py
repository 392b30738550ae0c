"""The composition root (workers/providers) builds a whole provider from its settings: the
simulated one end to end (a ladder climbs on what it built), the Kubernetes one against the API
emulator (the controller's cluster and jobs, an agent's marks and its own node), and a provider
registered by its settings model alone."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.testing import WorkflowEnvironment

from kubeapi import ApiServer
from remedy.core.models import CordonState
from remedy.detection.host import NodeHost
from remedy.detection.probe import probe_node
from remedy.ladder.remediation import Outcome
from remedy.runbook import RunbookSet
from remedy.scan.cluster import Cluster
from tests.kube import NODES, OWNER, gpu_problem, node
from tests.ladder import remediate
from workers.providers.parts import ControllerParts, NodeParts, ProviderUnreachable
from workers.providers.root import (
    PROVIDERS,
    HostSettings,
    KubernetesProvider,
    KubernetesSettings,
    SimProvider,
    SimSettings,
    build,
)

# -- the simulated provider, end to end -------------------------------------------------------


async def test_the_simulated_provider_built_from_settings_runs_a_ladder(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    provider = build(SimSettings(nodes=2, gpus_per_node=4, pool="built", name_prefix="built"))
    assert isinstance(provider, SimProvider)
    parts = provider.controller()
    assert parts.jobs is provider.jobs  # the seams are the fleet's (fleet.cluster)
    assert provider.jobs.pools == {"built": 2 * provider.jobs.gpus_per_node}
    node_name = sorted(provider.fleet.nodes)[0]
    host = provider.host_for(node_name)
    finding = provider.fleet.inject(node_name, "gpu_lost", gpu=1)  # a reboot brings it back
    assert not probe_node(node_name, host.nvml(), host.probe_config).healthy  # its machine
    assert type(provider.node(node_name, host).marks) is type(parts.cluster.marks)
    ran = await remediate(
        time_env,
        provider.fleet,
        finding,
        shipped_runbooks.match(finding),
        cluster=parts.cluster,
    )
    assert ran.result.outcome is Outcome.RECOVERED
    assert probe_node(node_name, host.nvml(), host.probe_config).healthy


def test_the_simulated_settings_are_checked() -> None:
    with pytest.raises(ValidationError):
        SimSettings(gpus_per_node=0)
    assert len(build(SimSettings(nodes=3)).fleet.nodes) == 3


# -- the Kubernetes provider, on the API emulator ---------------------------------------------


def _kubeconfig(api: ApiServer, path: Path) -> str:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{api.url}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return str(path)


async def test_the_kubernetes_provider_built_from_settings_reaches_the_cluster(
    api: ApiServer, tmp_path: Path
) -> None:
    api.objects[NODES, None, "n1"] = node()
    settings = KubernetesSettings(
        kubeconfig=_kubeconfig(api, tmp_path / "config"), kube_timeout=5, namespace="remedy"
    )
    provider = build(settings)
    assert isinstance(provider, KubernetesProvider)
    parts = provider.controller()
    assert isinstance(parts.cluster, Cluster) and parts.jobs is not None
    state = await asyncio.to_thread(parts.cluster.control.cordon, "n1", OWNER)
    assert state is CordonState.CORDONED
    assert api.objects[NODES, None, "n1"]["spec"]["unschedulable"] is True

    agent = provider.node("n1", NO_HOST)  # the agent's marks, written as the agent
    assert agent.marks is not None and agent.own is not None and agent.gpu_use is not None
    await asyncio.to_thread(agent.marks.set_conditions, "n1", [gpu_problem()])
    published = await asyncio.to_thread(parts.cluster.marks.conditions, "n1")
    assert [c.type for c in published] == [gpu_problem().type]


async def test_the_kubernetes_settings_say_what_the_agent_leaves_out(
    api: ApiServer, tmp_path: Path
) -> None:
    config = _kubeconfig(api, tmp_path / "config")
    quiet = KubernetesSettings(
        kubeconfig=config, self_cordon=False, pod_resources="", watch_jobs=False
    )
    agent = build(quiet).node("n1", NO_HOST)
    assert agent.marks is not None and agent.own is None and agent.gpu_use is None
    assert build(quiet).controller().jobs is None


def test_a_kubeconfig_that_does_not_load_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "config"
    broken.write_text("garbage: [")
    with pytest.raises(ProviderUnreachable, match=str(broken)):
        build(KubernetesSettings(kubeconfig=str(broken))).controller()


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"replace_provider": "cloud"}, "unknown replace provider 'cloud'"),
        ({"drain_mode": ["jobs=evict-harder"]}, "drain_mode: "),
        ({"drain_mode": ["*=delete-after-timeout"], "drain_delete_after": 3600}, "drain_delete_"),
    ],
)
def test_kubernetes_settings_refuse_what_no_cluster_could_do(
    settings: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        KubernetesSettings.model_validate(settings)


def test_host_settings_refuse_a_kernel_log_or_reboot_command_that_cannot_work() -> None:
    with pytest.raises(ValidationError, match="kernel_log"):
        HostSettings(node="n", kernel_log="carrier-pigeon")
    with pytest.raises(ValidationError, match="reboot_command"):
        HostSettings(node="n", reboot_command="   ")


# -- another provider: its settings and its class, registered ---------------------------------


class ToySettings(BaseModel):
    kind: Literal["toy"] = "toy"
    nodes: int = 1


@dataclass
class ToyProvider:
    """Another scheduler's provider, reusing the twin's seams: what a new one registers."""

    settings: ToySettings

    def controller(self) -> ControllerParts:
        return SimProvider(SimSettings(nodes=self.settings.nodes)).controller()

    def node(self, name: str, host: NodeHost) -> NodeParts:
        return NodeParts()


def test_a_provider_is_its_settings_and_its_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, ToySettings, ToyProvider)
    parts = build(ToySettings(nodes=2)).controller()  # type: ignore[call-overload]
    assert len(parts.cluster.fleet.nodes()) == 2


class _NoHost:
    """A host nothing is asked of: the provider only keeps it for which pod uses which GPU."""

    def nvml(self) -> object:  # pragma: no cover - read only on the agent's rounds
        raise AssertionError("not read here")


NO_HOST = cast(NodeHost, _NoHost())
