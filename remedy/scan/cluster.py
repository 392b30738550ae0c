"""The cluster seams: what remedy does through the cluster API, one small protocol per concern,
bundled in ``Cluster``. Adapters: simulated (``adapters/sim``), Kubernetes
(``adapters/kubernetes``). A new scheduler or a cloud's replacement API implements only the
protocols it changes; the rest of the bundle stays as it is."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from remedy.acting.gpu_scope import GpuScopedControl
from remedy.acting.mig_layout import MigLayouts
from remedy.attribution.evidence import RecentXid
from remedy.core.models import CordonState, NodeBoot
from remedy.detection.conditions import NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.quarantine import BreakerState
from remedy.scan.fabric import FabricJobs

log = logging.getLogger(__name__)


def _free() -> bool:
    return False


@dataclass(frozen=True)
class CordonOwner:
    workflow_id: str
    reason: str
    # Asked just before a new cordon is written (never for a node already cordoned, which is
    # adopted or left alone): True refuses it with HELD_BY_BREAKER (a published breaker).
    held: Callable[[], bool] = field(default=_free, compare=False)
    # The node's agent writes it ahead of any ladder: marked, so that the scan can tell a
    # cordon no ladder ever took up (the agent's report never arrived) from a person's.
    by_agent: bool = False


class NodeControl(Protocol):
    """Taking a node out of service and back (the ladder's cluster-side rungs)."""

    def cordon(self, node: str, owner: CordonOwner) -> CordonState: ...

    def restore(self, node: str) -> bool:
        """Undo remedy's own cordon; True if the node was uncordoned. Others' cordons stay."""

    def drain(self, node: str, on_progress: Callable[[int], None], key: str) -> str:
        """Evict the node's pods and say what was done (DaemonSet and mirror pods stay).
        At most once per ``key`` (remedy/core/once.py): a repeat answers what the first drain did;
        an empty key (an older ladder's request) is not recorded."""

    def kill_gpu_pods(self, node: str, key: str) -> str:
        """Delete the pods using the node's GPUs and say what was done; ``key`` as for drain."""

    def node_boot(self, node: str) -> NodeBoot: ...


class NodeMarks(Protocol):
    """What agents and the controller publish on a node for others to read."""

    def conditions(self, node: str) -> list[NodeCondition]: ...

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None: ...

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        """Add the agent's new Xids to those kept on the node (job attribution reads them)."""

    def xids_since(self, node: str, since: datetime) -> list[RecentXid]:
        """The Xids kept on the node raised at or after ``since`` (a rung's quiet watch)."""

    def publish_agent_key(self, node: str, key: str) -> None:
        """The node's agent publishes the public key its reports are signed with (an OpenSSH
        Ed25519 blob, remedy.trust.identity) on its own node."""

    def agent_key(self, node: str) -> str | None:
        """The key the node's agent published (None: none, or no such node)."""

    def person_hold(self, node: str) -> str | None:
        """The node's hold for a person as its annotation says (remedy.trust.person_hold)."""

    def set_person_hold(self, node: str, text: str | None) -> str | None:
        """Write the node's hold for a person (None: remove it); what was there before."""


class FleetView(Protocol):
    """The fleet as a whole: what the scan and the disruption budget count."""

    def nodes(self) -> list[NodeFacts]:
        """Every node with what the fleet scan needs to know about it."""

    def pool_size(self, pool: str) -> int:
        """How many nodes the pool has (the base of its disruption budget); the pool
        ``remedy.disruption.budget.CLUSTER_POOL``: every node of the fleet."""

    def pool_gpus(self, pool: str) -> dict[str, int]:
        """The GPUs of each node of the pool (the base of its GPU budget, and what a node
        lease takes out)."""


class GpuWorkload(Protocol):
    """What runs on a node's GPUs: the active checks take idle nodes without disrupting."""

    def gpu_pods(self, node: str) -> list[str]:
        """The running pods that use the node's GPUs (empty: the node is idle)."""


class AdmissionGate(Protocol):
    """Keeping new hardware from work until it is validated."""

    def hold_for_admission(self, node: str) -> None:
        """Make sure the node carries the admission taint (no work until it is validated)."""

    def admit(self, node: str, serials: list[str]) -> None:
        """Remove the admission taint; label the node validated and record its GPU serials."""

    def reject(self, node: str, reason: str) -> None:
        """Keep the admission taint and record why the node was turned away."""


class GpuHandoff(Protocol):
    """The cluster's own GPU software stepping aside for a GPU reset, and coming back."""

    def release_gpus(self, node: str) -> str:
        """Stop the cluster's own GPU pods on the node (device plugin, DCGM, exporters) so a
        GPU reset can run; say what was done."""

    def return_gpus(self, node: str) -> None:
        """Undo release_gpus: let those pods come back."""


class Alerts(Protocol):
    """Telling people what remedy will not do (a breaker tripped, a silence storm), where they
    look: one Kubernetes Event about ``node``, the node that tipped it."""

    def event(self, node: str, reason: str, message: str, warning: bool = False) -> None: ...


class BreakerBoard(Protocol):
    """Where each budget publishes its breaker (remedy.disruption.quarantine.BreakerState) so that a
    ladder's first cordon and a node's agent read it in one cheap call instead of asking the
    budget workflow and waiting for its answer."""

    def publish(self, pool: str, state: BreakerState) -> None: ...

    def holding(self, pools: list[str]) -> list[str]:
        """Those of ``pools`` whose published breaker holds new cordons (never published:
        closed)."""


class Replacer(Protocol):
    """Whatever provisions nodes: Karpenter, a cloud's API, a person with a ticket."""

    def replace(self, node: str, node_uid: str) -> str:
        """Hand the node back for new hardware; say what was done. ActionRefused when this
        replacer cannot tell how to replace that node: guessing could lose capacity.
        ``node_uid``: the node object the ladder saw; when it is gone or another one stands
        under the name, the replacement already happened — answer that, do nothing again."""


@dataclass(frozen=True)
class Cluster:
    """One implementation of each seam: what the controller is wired with."""

    control: NodeControl
    marks: NodeMarks
    fleet: FleetView
    admission: AdmissionGate
    gpus: GpuHandoff
    replacer: Replacer
    workload: GpuWorkload | None = None  # None: unknown, so every node counts as busy
    alerts: Alerts | None = None  # None: alerts go to the controller's log only
    gpu_scope: GpuScopedControl | None = None  # None: GPU-scoped rungs are refused
    mig: MigLayouts | None = None  # None: no MIG layout is checked after a reset or a reboot
    breakers: BreakerBoard | None = None  # None: no cordon goes before its budget's leave
    fabric: FabricJobs | None = None  # None: fabric tests are refused (a failed test)


@dataclass(frozen=True)
class OwnNode:
    """What a node's agent may do to its own node besides publishing: cordon it for its ladder,
    with remedy's own marks, once the published breakers let it (the admission policy confines
    it to that node and those marks: deploy/agent-policy.yaml)."""

    control: NodeControl
    breakers: BreakerBoard


def held_by(board: BreakerBoard | None, pools: list[str]) -> Callable[[], bool]:
    """A cordon's ``held``: the published breakers of ``pools`` (none: never held). Without a
    board, or when it cannot be read, the cordon is held: it waits for leave, as before."""
    if not pools:
        return _free
    if board is None:
        return lambda: True

    def held() -> bool:
        try:
            return bool(board.holding(pools))
        except Exception:  # noqa: BLE001 - unread (no rights, API down): ask first, as before
            log.warning("breakers of %s unread: the cordon asks first", pools, exc_info=True)
            return True

    return held
