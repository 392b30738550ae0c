"""NVSwitch errors (SXid lines in the kernel log) as findings about the switch.

A fatal SXid leaves the switch, and NVLink traffic through it, unusable until the fabric is
reset: critical, and the ``nvswitch`` runbook's. Non-fatal and correctable ones are recorded
(informational: no remediation). A line without the fatality word says nothing NVIDIA
publishes an action for: a person reads it (critical, fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.xid.nvswitch import Fatality, SXidEvent

NVSWITCH = CheckTerms("nvswitch", "NVSwitch errors (SXid) in the kernel log")
# fatality → (reason, severity)
_REASONS: dict[Fatality, tuple[str, Severity]] = {
    Fatality.FATAL: (
        NVSWITCH.reason("SXidFatal", "a fatal NVSwitch error: the fabric needs a reset"),
        Severity.CRITICAL,
    ),
    Fatality.NON_FATAL: (
        NVSWITCH.reason("SXidNonFatal", "a non-fatal NVSwitch error (recorded)"),
        Severity.INFO,
    ),
    Fatality.CORRECTABLE: (
        NVSWITCH.reason("SXidCorrectable", "a corrected NVSwitch error (recorded)"),
        Severity.INFO,
    ),
    Fatality.UNKNOWN: (
        NVSWITCH.reason(
            "SXidUnknown", "an SXid line that says neither fatal nor non-fatal: a person reads it"
        ),
        Severity.CRITICAL,
    ),
}


def sxid_findings(
    node: str, events: Iterable[SXidEvent], not_before: datetime | None, now: datetime
) -> list[Finding]:
    """One finding per SXid event, skipping those logged before ``not_before`` (an earlier
    boot, as for Xids)."""
    out = []
    for event in events:
        if not_before and event.timestamp and event.timestamp < not_before:
            continue
        reason, severity = _REASONS[event.fatality]
        link = f" link {event.link}" if event.link is not None else ""
        out.append(
            Finding(
                node=node,
                check=NVSWITCH.check,
                reason=reason,
                severity=severity,
                component=Component(
                    kind=ComponentKind.NVSWITCH,
                    device=f"nvidia-{event.switch}",
                    pci_bus_id=event.pci_bus_id,
                ),
                evidence=f"SXid {event.code}{link}: {event.message}".strip(),
                observed_at=event.timestamp or now,
                nvidia_action=event.action.value,
            )
        )
    return out
