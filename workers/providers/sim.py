"""The simulated provider's class (registered in root.py): a fleet in this process, and the
faults its nodes can be given. Importing it loads the simulation only, no Kubernetes client."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from adapters.sim import FAULTS, FaultSpec
from adapters.sim import provider as sim
from adapters.sim.fleet import SimFleet
from adapters.sim.jobs import SimJobs
from adapters.sim.provider import SimSettings
from remedy.detection.host import NodeHost
from workers.providers.parts import ControllerParts, NodeParts

__all__ = ["FAULTS", "FaultSpec", "SimFleet", "SimJobs", "SimProvider", "SimSettings"]


class SimProvider:
    """A simulated fleet in this process: one fleet gives the cluster, every node's host and
    the guarded jobs (``fleet``, ``jobs``: what a test or the demo drives)."""

    def __init__(self, settings: SimSettings, clock: Callable[[], datetime] | None = None) -> None:
        self.settings = settings
        self.fleet: SimFleet = sim.sim_fleet(settings, *([clock] if clock else []))
        self.jobs: SimJobs = sim.sim_jobs(settings, self.fleet)

    def controller(self) -> ControllerParts:
        return ControllerParts(self.fleet.cluster, self.jobs)

    def node(self, name: str, on: NodeHost) -> NodeParts:
        return NodeParts(self.fleet.cluster.marks)

    def host_for(self, name: str) -> NodeHost:
        """Node ``name``'s simulated machine (the agents' worker serves them all)."""
        return self.fleet.host(name)
