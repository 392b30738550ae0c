"""The composition root (see __init__.py): every provider, one class each, registered in
``PROVIDERS`` by its settings model, built by ``build`` from the settings its adapter package's
entry declares (``adapters/<provider>/provider.py``). Adding a provider is that entry and its
class here (the simulated one's class is in sim.py, which loads no Kubernetes client, for the
commands that only simulate)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, overload

from kubernetes import client as k8s

from adapters.host import provider as host
from adapters.host.provider import HostSettings
from adapters.kubernetes import provider as kubernetes
from adapters.kubernetes.provider import KubernetesSettings
from adapters.sim.provider import SimSettings
from remedy.detection.host import NodeHost
from workers.providers.parts import ControllerParts, NodeParts, Provider, ProviderUnreachable
from workers.providers.sim import SimProvider

__all__ = [
    "PROVIDERS",
    "ControllerParts",
    "HostSettings",
    "KubernetesProvider",
    "KubernetesSettings",
    "NodeParts",
    "ProviderSettings",
    "SimProvider",
    "SimSettings",
    "build",
    "local_host",
]


class KubernetesProvider:
    """A Kubernetes cluster: its API client made once, on first use."""

    def __init__(self, settings: KubernetesSettings) -> None:
        self.settings = settings

    @cached_property
    def api(self) -> k8s.ApiClient:
        try:
            return self.settings.api()
        except kubernetes.KubeconfigError as exc:
            raise ProviderUnreachable(str(exc)) from None

    def controller(self) -> ControllerParts:
        return ControllerParts(
            kubernetes.controller_cluster(self.settings, self.api),
            kubernetes.guarded_jobs(self.settings, self.api),
        )

    def node(self, name: str, on: NodeHost) -> NodeParts:
        marks = kubernetes.agent_marks(self.api)
        return NodeParts(
            marks,
            kubernetes.own_node(self.settings, self.api),
            host.gpu_use(name, self.settings.pod_resources, on, marks),
        )


ProviderSettings = KubernetesSettings | SimSettings
PROVIDERS: dict[type[Any], Callable[[Any], Provider]] = {
    KubernetesSettings: KubernetesProvider,
    SimSettings: SimProvider,
}


@overload
def build(settings: KubernetesSettings) -> KubernetesProvider: ...
@overload
def build(settings: SimSettings) -> SimProvider: ...
@overload
def build(settings: ProviderSettings) -> Provider: ...
def build(settings: ProviderSettings) -> Provider:
    """The provider its settings name (KeyError: a settings model no provider registered)."""
    return PROVIDERS[type(settings)](settings)


def local_host(settings: HostSettings) -> NodeHost:
    """This machine, as its settings allow (resets and reboots refused unless allowed)."""
    return host.local_host(settings)
