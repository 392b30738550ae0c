"""What a provider gives the processes, whichever it is: the controller's parts, a node agent's
parts, and the shape every provider's class in registry.py has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from remedy.attribution.jobs import JobSide
from remedy.detection.host import NodeHost
from remedy.detection.pod_resources import GpuUseReporter
from remedy.scan.cluster import Cluster, NodeMarks, OwnNode


class ProviderUnreachable(Exception):
    """The provider's API cannot be used (no kubeconfig that loads, say): one line saying why."""


@dataclass(frozen=True)
class ControllerParts:
    """The controller's seams: the cluster, and its guarded jobs (None: no job guards)."""

    cluster: Cluster
    jobs: JobSide | None = None


@dataclass(frozen=True)
class NodeParts:
    """What a node's agent has besides its host: where it publishes (None: nowhere), what it
    may do to its own node (None: no cordon of its own), and which pod uses which GPU (None:
    not published)."""

    marks: NodeMarks | None = None
    own: OwnNode | None = None
    gpu_use: GpuUseReporter | None = None


class Provider(Protocol):
    def controller(self) -> ControllerParts:
        """The controller's parts, written as the controller."""
        ...

    def node(self, name: str, host: NodeHost) -> NodeParts:
        """Node ``name``'s agent's parts, written as the agent, over its ``host``."""
        ...
