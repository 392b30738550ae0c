"""Does a ladder do first what NVIDIA recommends first for the Xids it matches?

The Xid catalog (``remedy/xid/catalog.yaml``) carries NVIDIA's immediate action per Xid; a
ladder's *first effective rung* is its first rung that acts on the fault — ``kill_job``,
``reset_gpu``, ``restart_fabric_manager``, ``reboot`` or ``replace``. Draining only clears the
node for what follows and a diagnose only looks, so neither counts. Worked example:
``gpu-memory-ecc`` matches Xid 48 (NVIDIA: reset the GPU) and climbs drain → reset_gpu → reboot
…: its first effective rung is ``reset_gpu``, as it should be; a ladder that rebooted first for
Xid 13 (NVIDIA: restart the application) would be reported."""

from __future__ import annotations

from remedy.core.models import Action
from remedy.detection.vocabulary import XID_REASON
from remedy.runbook.schema import Runbook
from remedy.xid.actions import XidAction
from remedy.xid.catalog import Decoder, XidCatalog

EFFECTIVE = (
    Action.KILL_JOB,
    Action.RESET_GPU,
    Action.RESTART_FABRIC_MANAGER,
    Action.REBOOT,
    Action.REPLACE,
)

# NVIDIA's immediate action → the first effective rungs that agree with it (None: no rung
# acts on the fault, e.g. a ladder that only diagnoses or drains and holds for a person).
_HOLD = frozenset({None})
AGREES: dict[XidAction, frozenset[Action | None]] = {
    # Ignore: no ladder should be started for it at all (checked separately).
    XidAction.IGNORE: _HOLD,
    # Restart the application: stop the job's pods (its controller restarts them), or leave
    # the job to restart itself; never act on the hardware first.
    XidAction.RESTART_APP: frozenset({Action.KILL_JOB, None}),
    XidAction.RESET_GPU: frozenset({Action.RESET_GPU}),
    XidAction.REBOOT: frozenset({Action.REBOOT}),
    XidAction.RESTART_VM: frozenset({Action.REBOOT}),  # on Kubernetes the VM is the node
    # Restart Fabric Manager (WORKFLOW_XID_45), or leave it to a person as before.
    XidAction.RESTART_FABRIC_MANAGER: frozenset({Action.RESTART_FABRIC_MANAGER, None}),
    # A person decides: nothing disruptive first.
    XidAction.CONTACT_SUPPORT: _HOLD,
    XidAction.CHECK_MECHANICALS: _HOLD,
    XidAction.UPDATE_SOFTWARE: _HOLD,
}
# Where the message decides (Xid 154 names the recovery it needs; 74, 144–150 and 45 carry a
# payload), the catalog's action is only the fallback: anything short of a replacement.
DECODED = frozenset(
    {Action.KILL_JOB, Action.RESET_GPU, Action.RESTART_FABRIC_MANAGER, Action.REBOOT, None}
)

# One architecture per family the catalog tells apart (NVML_DEVICE_ARCH_*: Volta 5, Ampere 7,
# Hopper 9, Blackwell 10): a ladder must agree with the advice on every one it may run on.
ARCHITECTURES = (5, 7, 9, 10)


def first_effective_rung(runbook: Runbook) -> Action | None:
    return next((r.action for r in runbook.ladder if r.action in EFFECTIVE), None)


def matched_xids(runbook: Runbook) -> list[int]:
    """Every Xid the runbook's clauses name, as ``xids`` or as ``XidNN`` reasons."""
    named = {x for clause in runbook.match for x in clause.xids}
    named |= {
        int(r.removeprefix("Xid"))
        for clause in runbook.match
        for r in clause.reasons
        if XID_REASON.match(r)
    }
    return sorted(named)


def matched_actions(runbook: Runbook) -> list[XidAction]:
    """Every NVIDIA action the runbook's clauses route (``nvidia_actions``)."""
    named = {a for clause in runbook.match for a in clause.nvidia_actions}
    return sorted(XidAction(a) for a in named if a in tuple(XidAction))


def disagreements(runbook: Runbook, catalog: XidCatalog) -> list[str]:
    """One line per Xid (or NVIDIA action) the runbook matches whose recommended first action
    its ladder does not take first, on any GPU architecture family; none when it agrees."""
    first = first_effective_rung(runbook)
    took = first.value if first else "no rung that acts on the fault"
    problems = []
    for action in matched_actions(runbook):
        problems += _against(f"{runbook.name}: nvidia_actions", action, first, took)
    for xid in matched_xids(runbook):
        infos = [catalog.lookup(xid, arch) for arch in ARCHITECTURES]
        if any(i.decode is not Decoder.NONE for i in infos):
            if first not in DECODED:
                problems.append(
                    f"{runbook.name}: Xid {xid}: its message decides NVIDIA's first action; "
                    f"the ladder's first effective rung is {took}"
                )
            continue
        for advice in sorted({i.action for i in infos}):
            problems += _against(f"{runbook.name}: Xid {xid}", advice, first, took)
    return problems


def _against(what: str, advice: XidAction, first: Action | None, took: str) -> list[str]:
    """The problem, if any, with a ladder whose first effective rung is ``first`` for what
    NVIDIA advises."""
    if advice is XidAction.IGNORE:
        return [f"{what}: NVIDIA says to ignore it, yet the runbook starts a ladder for it"]
    if first not in AGREES[advice]:
        return [
            f"{what}: NVIDIA's first action is {advice.value}; "
            f"the ladder's first effective rung is {took}"
        ]
    return []
