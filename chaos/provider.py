"""The chaos run's provider: a simulated fleet kept in a file that every process of the run
shares (chaos/store.py), its seams one transaction on the file each (chaos/seams.py): a provider
of the composition root's shape (workers/providers/parts.py), built from ``StoredSettings``. The
fleet in the file is the root's simulated one (``fleet_for``). It loads no Kubernetes client: a
killed process starts again in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from chaos.seams import StoredHost, stored_cluster
from chaos.store import FleetStore
from remedy.detection.host import NodeHost
from workers.providers.parts import ControllerParts, NodeParts
from workers.providers.sim import SimFleet, SimProvider, SimSettings


class StoredSettings(BaseModel):
    """The fleet file of one chaos run."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["chaos-file"] = "chaos-file"
    fleet: Path


class StoredProvider:
    def __init__(self, settings: StoredSettings) -> None:
        self.store = FleetStore(settings.fleet)

    def controller(self) -> ControllerParts:
        return ControllerParts(stored_cluster(self.store))

    def node(self, name: str, host: NodeHost) -> NodeParts:
        return NodeParts()  # the simulated agents publish nothing of their own

    def host_for(self, name: str) -> NodeHost:
        """Node ``name``'s machine, read and written through the file."""
        return StoredHost(self.store, name)


def fleet_for(settings: SimSettings) -> SimFleet:
    """A run's fleet before it goes into its file, from the root's simulated provider."""
    return SimProvider(settings).fleet
