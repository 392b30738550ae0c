"""How a rung is verified: with what saw the fault, not always with a plain probe.

A re-probe reads the GPU's state: it sees an ECC counter or a GPU off the bus while they last.
It cannot see a fault that only a load test shows (a GPU that answers queries and fails under
load), nor one that is only an event (most Xids: a micro-controller halt, Xid 62, leaves nothing
for the probe to read). After a rung that did not fix such a fault, the probe is clean anyway —
a false recovery, and the next incident on that GPU. So:

- a fault the deep diagnose found (``load``) is verified by running the diagnose again;
- an Xid that no probe sees is verified by a quiet watch: no recurrence of that Xid on that
  GPU for the runbook's ``watch`` after the rung (then a clean probe as well);
- anything else by the probe, as before.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from remedy.attribution.evidence import RecentXid, recent_xid
from remedy.core.models import ComponentKind, Finding, Frozen, NodeRef, ProbeReport
from remedy.detection import vocabulary

LOAD_CHECK = "load"  # the deep diagnose's check (remedy/detection/probe/diagnose.py)


class VerifyBy(StrEnum):
    PROBE = "probe"
    DIAGNOSE = "diagnose"  # re-run the deep diagnose
    WATCH = "watch"  # a quiet watch window for the Xid


def verify_by(trigger: Finding) -> VerifyBy:
    """What can see the trigger's fault after a rung. For example: ``memory/EccUncorrectable``
    → probe (it reads the counter); ``load/FailsUnderLoad`` → diagnose; ``xid/Xid62`` (or
    ``Xid62`` rebuilt from a node condition) → watch; ``manual/ManualTrigger`` → probe (nothing
    better is known)."""
    if vocabulary.seen_by_probe(trigger.check, trigger.reason):
        return VerifyBy.PROBE
    check = trigger.check if trigger.check in vocabulary.checks() else None
    check = check or vocabulary.check_of(trigger.reason)
    if check == LOAD_CHECK:
        return VerifyBy.DIAGNOSE
    if trigger.xid is not None:
        return VerifyBy.WATCH
    return VerifyBy.PROBE


def recurrences(trigger: Finding, seen: list[RecentXid], since: datetime) -> list[RecentXid]:
    """The trigger's Xid again, on the trigger's GPU, at or after ``since`` (the rung's end).
    A trigger that names no GPU matches the code on any GPU (fail closed)."""
    mine = recent_xid(trigger)
    if mine is None:
        return []
    component = trigger.component
    named = any((component.serial, component.uuid, component.pci_bus_id)) or (
        component.index is not None
    )
    return [
        x
        for x in seen
        if x.code == mine.code and x.at >= since and (not named or x.gpu == mine.gpu)
    ]


def on_part_of(trigger: Finding, finding: Finding) -> bool:
    """Whether ``finding`` is about the part ``trigger`` is (its GPU, NIC or switch): what a
    rung acting on that part answers for. A trigger about the whole node owns every finding,
    and a finding about the whole node (a probe that could not run) belongs to every trigger:
    fail closed. For example, with the trigger Xid 62 on GPU 6: RowRemapFailure on GPU 0 is
    another part's; ProbeUnavailable on the node is the trigger's."""
    mine, other = trigger.component, finding.component
    if mine.kind is ComponentKind.NODE or other.kind is ComponentKind.NODE:
        return True
    if mine.kind is not other.kind:
        return False
    for a, b in (
        (mine.uuid, other.uuid),
        (mine.serial, other.serial),
        (mine.pci_bus_id, other.pci_bus_id),
        (mine.device, other.device),
    ):
        if a and b:
            return a == b
    if mine.index is None or other.index is None:
        return True  # cannot tell them apart: the same part, to be safe
    return mine.index == other.index


def healthy_for(trigger: Finding, report: ProbeReport) -> bool:
    """The probe shows the trigger's part healthy: it ran, and nothing unhealthy is on that
    part (another part's fault is a finding of its own, not a failed verification)."""
    return bool(report.checks_run) and not any(
        f.unhealthy and on_part_of(trigger, f) for f in report.findings
    )


def other_parts(trigger: Finding, report: ProbeReport) -> list[Finding]:
    """The probe's unhealthy findings about parts other than the trigger's."""
    return [f for f in report.findings if f.unhealthy and not on_part_of(trigger, f)]


class XidsSince(Frozen):
    """Which Xids has the node raised since ``since``?"""

    node: NodeRef
    since: datetime


class SeenXids(Frozen):
    xids: list[RecentXid] = []
