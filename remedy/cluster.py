"""The Cluster seam: what remedy does through the cluster API. Adapters: simulated, Kubernetes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from remedy.attribution.evidence import RecentXid
from remedy.conditions import NodeCondition
from remedy.fleet import NodeFacts
from remedy.models import CordonState, NodeBoot


@dataclass(frozen=True)
class CordonOwner:
    workflow_id: str
    reason: str


@dataclass(frozen=True)
class DrainResult:
    evicted: int
    skipped: int  # DaemonSet and mirror pods stay


class Cluster(Protocol):
    def cordon(self, node: str, owner: CordonOwner) -> CordonState: ...

    def restore(self, node: str) -> bool:
        """Undo remedy's own cordon; True if the node was uncordoned. Others' cordons stay."""

    def drain(self, node: str, on_progress: Callable[[int], None]) -> DrainResult: ...

    def kill_gpu_pods(self, node: str) -> int: ...

    def replace(self, node: str) -> str: ...

    def node_boot(self, node: str) -> NodeBoot: ...

    def pool_size(self, pool: str) -> int:
        """How many nodes the pool has (the base of its disruption budget)."""

    def release_gpus(self, node: str) -> int:
        """Stop the cluster's own GPU pods on the node (device plugin, DCGM, exporters) so a
        GPU reset can run; return how many left."""

    def return_gpus(self, node: str) -> None:
        """Undo release_gpus: let those pods come back."""

    def conditions(self, node: str) -> list[NodeCondition]: ...

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None: ...

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        """Add the agent's new Xids to those kept on the node (job attribution reads them)."""

    def nodes(self) -> list[NodeFacts]:
        """Every node with what the fleet scan needs to know about it."""

    def hold_for_admission(self, node: str) -> None:
        """Make sure the node carries the admission taint (no work until it is validated)."""

    def admit(self, node: str, serials: list[str]) -> None:
        """Remove the admission taint; label the node validated and record its GPU serials."""

    def reject(self, node: str, reason: str) -> None:
        """Keep the admission taint and record why the node was turned away."""
