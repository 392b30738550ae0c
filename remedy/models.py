"""The domain's vocabulary: nodes, findings, probe reports, actions and remediation state.

Every model here crosses a boundary (a signal, an activity, a query, a CLI's JSON), so each is
one pydantic model that can gain fields without breaking running workflows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    INFO = "info"  # recorded, never unhealthy (e.g. a row remap that already took effect)
    WARNING = "warning"
    CRITICAL = "critical"


class Action(StrEnum):
    """What remedy can do to a node, from the least to the most disruptive."""

    DIAGNOSE = "diagnose"
    CORDON = "cordon"
    DRAIN = "drain"
    KILL_JOB = "kill_job"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    REPLACE = "replace"
    RESTORE = "restore"  # undo what remedy did to a node that recovered


# Actions that take work away from a node; they will hold a disruption-budget lease.
DISRUPTIVE_ACTIONS = frozenset(
    {Action.DRAIN, Action.KILL_JOB, Action.RESET_GPU, Action.REBOOT, Action.REPLACE}
)
# Actions on the hardware itself; an application fault must never reach them.
HARDWARE_ACTIONS = frozenset({Action.RESET_GPU, Action.REBOOT, Action.REPLACE})
# Actions that run on the node, in the node agent's worker, not in the controller.
HOST_LOCAL_ACTIONS = frozenset({Action.DIAGNOSE, Action.RESET_GPU, Action.REBOOT})


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeRef(Frozen):
    name: str = Field(min_length=1)
    pool: str = "default"


class ComponentKind(StrEnum):
    GPU = "gpu"
    NIC = "nic"
    NODE = "node"


class Component(Frozen):
    """The part a finding is about: a GPU (index, UUID, serial, PCI bus id), a NIC, or the node."""

    kind: ComponentKind = ComponentKind.NODE
    index: int | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    device: str | None = None  # NIC device name, e.g. mlx5_0

    def describe(self) -> str:
        if self.kind is ComponentKind.GPU:
            return f"GPU {self.index}" + (f" ({self.serial})" if self.serial else "")
        if self.kind is ComponentKind.NIC:
            return f"NIC {self.device}"
        return "node"


class Finding(Frozen):
    """One thing a check saw. ``reason`` is a stable CamelCase code runbooks match on."""

    node: str
    check: str  # inventory, xid, memory, thermal, pcie, nvlink, nic, probe
    reason: str
    severity: Severity
    component: Component = Component()
    xid: int | None = None
    evidence: str = ""
    observed_at: datetime
    # The process an Xid's kernel-log line names: ties the Xid to a job (job attribution).
    pid: int | None = None
    process: str | None = None

    @property
    def unhealthy(self) -> bool:
        return self.severity is not Severity.INFO

    def headline(self) -> str:
        code = f"Xid {self.xid}" if self.xid is not None else self.reason
        return f"{code} on {self.component.describe()}"


class ProbeReport(Frozen):
    node: str
    checks_run: list[str]
    findings: list[Finding] = []
    gpus: list[Component] = []  # inventory: index, UUID, serial and PCI bus id of each GPU
    started_at: datetime
    duration_s: float = 0.0

    @property
    def healthy(self) -> bool:
        # Fail closed: a probe that ran no check proves nothing.
        return bool(self.checks_run) and not any(f.unhealthy for f in self.findings)

    def gpu_indices(self) -> list[int]:
        return sorted(
            {
                f.component.index
                for f in self.findings
                if f.unhealthy
                and f.component.index is not None
                and f.component.kind is ComponentKind.GPU
            }
        )


class ActionRequest(Frozen):
    """Input of every action activity."""

    node: NodeRef
    action: Action
    reason: str
    workflow_id: str
    gpu_indices: list[int] = []  # empty: all GPUs of the node
    dry_run: bool = False


class ActionResult(Frozen):
    ok: bool
    detail: str = ""


class ProbeRequest(Frozen):
    node: NodeRef


class BootRequest(Frozen):
    node: NodeRef
    previous_boot_id: str = ""


class NodeBoot(Frozen):
    """The node's boot id (Kubernetes ``status.nodeInfo.bootID``) and whether it is Ready."""

    boot_id: str
    ready: bool


class CordonState(StrEnum):
    CORDONED = "cordoned"  # remedy cordoned it just now
    ALREADY_OURS = "already_ours"  # an earlier remedy action holds the cordon
    BY_OTHER = "cordoned_by_other"  # someone else cordoned it: never undo that


class CordonResult(Frozen):
    state: CordonState


class ConditionsUpdate(Frozen):
    """Publish the node's conditions from this probe report (remedy verified it)."""

    node: NodeRef
    report: ProbeReport
