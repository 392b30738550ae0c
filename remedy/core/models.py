"""The domain's vocabulary: nodes, findings, probe reports, actions and remediation state.

Every model here crosses a boundary (a signal, an activity, a query, a CLI's JSON), so each is
one pydantic ``Wire`` model that can gain fields without breaking running workflows, and that
older workers read even when a newer one added fields. ``Action`` and ``Scope`` are defined
beside the table of actions (``remedy.core.actions``) and named here too.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from remedy.core.actions import Action as Action  # defined beside its table, named here too
from remedy.core.actions import Scope as Scope


class Untrusted:
    """Marks a text field that holds what a pod or a node wrote (a log line, a kernel message,
    a tool's output): remedy.redaction hides secrets in it before it reaches a workflow."""


FreeText = Annotated[str, Untrusted()]


class Severity(StrEnum):
    INFO = "info"  # recorded, never unhealthy (e.g. a row remap that already took effect)
    WARNING = "warning"
    CRITICAL = "critical"


class Wire(BaseModel):
    """A message between workflows, activities and processes. A field that a newer remedy added
    is ignored, not an error: an older worker must still read a newer payload or history
    (rollbacks). Files people write (runbooks) are checked strictly where they are loaded."""

    model_config = ConfigDict(extra="ignore")


class Frozen(Wire):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Wraps(Frozen):
    """A message of one field that earlier releases sent bare (a string or a list).

    Read from both forms: a bare payload comes from a recorded history or an older process.
    Written bare for this one release (read both, write old; then write new): a rollback to
    the release before, which reads only the bare form, must still understand what this one
    wrote into its histories. The next release writes the model, which this one already reads
    — with any fields that one added ignored. A field added since is written (the model form)
    only when it says more than its default: what the release before could not have sent."""

    @model_validator(mode="before")
    @classmethod
    def _from_bare(cls, data: Any) -> Any:
        return data if isinstance(data, dict) else {next(iter(cls.model_fields)): data}

    @model_serializer(mode="wrap")
    def _to_bare(self, handler: SerializerFunctionWrapHandler) -> Any:
        first, *added = type(self).model_fields.items()
        full = handler(self)
        said = any(getattr(self, name) != field.default for name, field in added)
        return full if said else full[first[0]]


class Started(Wraps):
    """A workflow that was started or joined."""

    workflow_id: str


class Done(Wraps):
    """What an action on something outside remedy did, in words."""

    detail: str


class NodeRef(Frozen):
    name: str = Field(min_length=1)
    pool: str = "default"


class ComponentKind(StrEnum):
    GPU = "gpu"
    NIC = "nic"
    NODE = "node"
    NVSWITCH = "nvswitch"


class Component(Frozen):
    """The part a finding is about: a GPU (index, UUID, serial, PCI bus id), a NIC, or the node."""

    kind: ComponentKind = ComponentKind.NODE
    index: int | None = None
    uuid: str | None = None
    serial: str | None = None
    pci_bus_id: str | None = None
    device: str | None = None  # NIC device name, e.g. mlx5_0; NVSwitch, e.g. nvidia-nvswitch3
    # A GPU's NVML architecture (nvmlDeviceGetArchitecture: Ampere 7, Hopper 9, Blackwell 10):
    # what an Xid means can differ by generation.
    architecture: int | None = None

    def describe(self) -> str:
        if self.kind is ComponentKind.GPU:
            return f"GPU {self.index}" + (f" ({self.serial})" if self.serial else "")
        if self.kind is ComponentKind.NIC:
            return f"NIC {self.device}"
        if self.kind is ComponentKind.NVSWITCH:
            return f"NVSwitch {self.device or self.pci_bus_id}"
        return "node"


class Finding(Frozen):
    """One thing a check saw. ``reason`` is a stable CamelCase code runbooks match on."""

    node: str
    check: str  # inventory, xid, memory, thermal, pcie, nvlink, nic, probe
    reason: str
    severity: Severity
    component: Component = Component()
    xid: int | None = None
    evidence: FreeText = ""
    observed_at: datetime
    # The process an Xid's kernel-log line names: ties the Xid to a job (job attribution).
    pid: int | None = None
    process: Annotated[str | None, Untrusted()] = None
    # NVIDIA's immediate action for an Xid (an XidAction value, remedy/xid/actions.py), read
    # from the message where it says (Xid 154's requested recovery), else the catalog's.
    # Runbooks route on it; a str so that a value a newer remedy adds never breaks this one.
    nvidia_action: str | None = None
    # The MIG GPU instance an Xid's line names (``GPU-I:nn``): a GPU-scoped rung acts on its pods.
    gpu_instance: int | None = None

    @property
    def unhealthy(self) -> bool:
        return self.severity is not Severity.INFO

    def headline(self) -> str:
        code = f"Xid {self.xid}" if self.xid is not None else self.reason
        return f"{code} on {self.component.describe()}"

    def fingerprint(self) -> str:
        """The same observation, whoever sends it again: what it saw, where, and when."""
        where = self.component.uuid or self.component.device or self.component.index
        return f"{self.check}/{self.reason}/{self.xid}/{where}@{self.observed_at.isoformat()}"


class ProbeReport(Frozen):
    node: str
    checks_run: list[str]
    findings: list[Finding] = []
    gpus: list[Component] = []  # inventory: index, UUID, serial and PCI bus id of each GPU
    started_at: datetime
    duration_s: float = 0.0
    load_engine: str = ""  # the deep diagnose's load test: dcgm, torch, cupy (empty: none)

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
    # A disruptive action's idempotency key (the ladder's run and the rung): a repeat with the
    # same key does nothing again and answers what the first did (remedy/core/once.py). Empty: a
    # request from a ladder that predates keys.
    key: str = ""
    node_uid: str = ""  # a replacement: the node object it is for (another one: done already)
    scope: Scope = Scope.NODE  # gpu: only the pods on gpu_indices (remedy/acting/gpu_scope.py)
    gpu_instance: int | None = None  # with scope gpu: only that MIG instance's pods, when known
    # A cordon sent before any leave: the pools whose published breaker it reads first; one
    # that holds new cordons refuses it (HELD_BY_BREAKER). Empty: none read (a cordon with leave).
    breakers: list[str] = []


class ActionResult(Frozen):
    ok: bool
    detail: FreeText = ""
    # What a check-like action (the diagnose) found, so a ladder judges the part it acts on.
    findings: list[Finding] = []
    # Not done: another repairer is at work on the node (who and what); the ladder steps back.
    other_repairer: str | None = None


class ProbeRequest(Frozen):
    node: NodeRef


class BootRequest(Frozen):
    node: NodeRef
    previous_boot_id: str = ""


class NodeBoot(Frozen):
    """The node's boot id (Kubernetes ``status.nodeInfo.bootID``), whether it is Ready, and the
    node object's uid (a replacement under the same name has another)."""

    boot_id: str
    ready: bool
    uid: str = ""
    # Another repairer at work on the node, as its own marks say (who and what): a reboot or
    # a replacement does not go ahead (None: nobody, or a cluster that cannot tell).
    other_repairer: str | None = None


class CordonState(StrEnum):
    CORDONED = "cordoned"  # remedy cordoned it just now
    ALREADY_OURS = "already_ours"  # an earlier remedy action holds the cordon
    BY_OTHER = "cordoned_by_other"  # someone else cordoned it: never undo that
    WOULD_CORDON = "would_cordon"  # dry run: nothing was cordoned, so nothing is restored
    # A published breaker holds new cordons (remedy.disruption.quarantine.BreakerState): nothing was
    # done;
    # the ladder asks its budgets and cordons once they give leave.
    HELD_BY_BREAKER = "held_by_breaker"


class CordonResult(Frozen):
    state: CordonState


class ConditionsUpdate(Frozen):
    """Publish the node's conditions from this probe report (remedy verified it)."""

    node: NodeRef
    report: ProbeReport


def signed(by: str, identity: str) -> str:
    """Who acted, as records say it: the name an operator gave (``--by``) and beside it the
    identity their client connected with — "alice (remedy-cli:alice@host)"."""
    return f"{by} ({identity})" if identity and identity != by else by


def vouched(by: str, identity: str, key: str) -> str:
    """Who made an operator's decision: with ``key`` (a signature the workflow verified) the
    keyring's name and the key's fingerprint, a fact; else what the caller claimed, marked
    so — "alice (remedy-cli:alice@host) [unverified]"."""
    return f"{by} [key {key}]" if key else f"{signed(by, identity)} {UNVERIFIED}"


UNVERIFIED = "[unverified]"  # a decision no verified key signed (``vouched``)
