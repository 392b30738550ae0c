"""NVSwitch errors (SXid lines in the kernel log) as findings about the switch.

A fatal SXid leaves the switch, and NVLink traffic through it, unusable until the fabric is
reset: critical, and the ``nvswitch`` runbook's. Non-fatal and correctable ones are recorded
(informational: no remediation). A line without the fatality word says nothing NVIDIA
publishes an action for: a person reads it (critical, fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from remedy.models import Component, ComponentKind, Finding, Severity
from remedy.vocabulary import NVSWITCH_CHECK
from remedy.xid.nvswitch import Fatality, SXidEvent

# fatality → (reason, severity)
_REASONS: dict[Fatality, tuple[str, Severity]] = {
    Fatality.FATAL: ("SXidFatal", Severity.CRITICAL),
    Fatality.NON_FATAL: ("SXidNonFatal", Severity.INFO),
    Fatality.CORRECTABLE: ("SXidCorrectable", Severity.INFO),
    Fatality.UNKNOWN: ("SXidUnknown", Severity.CRITICAL),
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
                check=NVSWITCH_CHECK,
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
