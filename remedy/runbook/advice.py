"""Does a ladder do first what NVIDIA recommends first for the Xids it matches?

The Xid catalog (``remedy/xid/catalog.yaml``) carries NVIDIA's immediate action per Xid; a
ladder's *first effective rung* is its first rung that acts on the fault — ``kill_job``,
``reset_gpu``, ``reboot`` or ``replace``. Draining only clears the node for what follows and a
diagnose only looks, so neither counts. Worked example: ``gpu-memory-ecc`` matches Xid 48
(NVIDIA: reset the GPU) and climbs drain → reset_gpu → reboot …: its first effective rung is
``reset_gpu``, as it should be; a ladder that rebooted first for Xid 13 (NVIDIA: restart the
application) would be reported."""

from __future__ import annotations

from remedy.models import Action
from remedy.runbook.schema import Runbook
from remedy.vocabulary import XID_REASON
from remedy.xid.catalog import FirstAction, XidCatalog

EFFECTIVE = (Action.KILL_JOB, Action.RESET_GPU, Action.REBOOT, Action.REPLACE)

# NVIDIA's immediate action → the first effective rungs that agree with it (None: no rung
# acts on the fault, e.g. a ladder that only diagnoses or drains and holds for a person).
AGREES: dict[FirstAction, frozenset[Action | None]] = {
    # Ignore: no ladder should be started for it at all (checked separately).
    FirstAction.NONE: frozenset({None}),
    # Restart the application: stop the job's pods (its controller restarts them), or leave
    # the job to restart itself; never act on the hardware first.
    FirstAction.RESTART_APP: frozenset({Action.KILL_JOB, None}),
    FirstAction.RESET_GPU: frozenset({Action.RESET_GPU}),
    FirstAction.REBOOT: frozenset({Action.REBOOT}),
    # The payload or a person decides (Xid 154 names the action it needs): anything short of
    # a replacement.
    FirstAction.INSPECT: frozenset({Action.KILL_JOB, Action.RESET_GPU, Action.REBOOT, None}),
}

# One architecture per table of the catalog (NVML_DEVICE_ARCH_*: Volta 5; None: Ampere and
# newer): a ladder must agree with the advice on every generation it may run on.
ARCHITECTURES = (5, None)


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


def disagreements(runbook: Runbook, catalog: XidCatalog) -> list[str]:
    """One line per Xid the runbook matches whose recommended first action its ladder does
    not take first, on any GPU generation; none when it agrees."""
    first = first_effective_rung(runbook)
    took = first.value if first else "no rung that acts on the fault"
    problems = []
    for xid in matched_xids(runbook):
        for advice in sorted({catalog.lookup(xid, arch).action for arch in ARCHITECTURES}):
            if advice is FirstAction.NONE:
                problems.append(
                    f"{runbook.name}: Xid {xid}: NVIDIA says to ignore it, "
                    "yet the runbook starts a ladder for it"
                )
            elif first not in AGREES[advice]:
                problems.append(
                    f"{runbook.name}: Xid {xid}: NVIDIA's first action is {advice.value}; "
                    f"the ladder's first effective rung is {took}"
                )
    return problems
