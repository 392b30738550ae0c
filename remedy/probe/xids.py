"""Xid events (from NVML or the kernel log) as findings."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from remedy.models import Component, ComponentKind, Finding
from remedy.xid.kernel_log import XidEvent, normalize_pci


def xid_findings(
    node: str,
    events: Iterable[XidEvent],
    not_before: datetime | None,
    now: datetime,
    gpus: Iterable[Component] = (),
) -> list[Finding]:
    """One finding per event, skipping events logged before ``not_before`` (an earlier boot:
    the reboot that a ladder just finished must not start it again)."""
    by_pci = {normalize_pci(g.pci_bus_id): g for g in gpus if g.pci_bus_id}
    by_uuid = {g.uuid: g for g in gpus if g.uuid}
    out = []
    for event in events:
        if not_before and event.timestamp and event.timestamp < not_before:
            continue
        gpu = (
            by_uuid.get(event.gpu_uuid or "")
            or by_pci.get(event.pci_bus_id)
            or Component(kind=ComponentKind.GPU, uuid=event.gpu_uuid, pci_bus_id=event.pci_bus_id)
        )
        who = f" (pid {event.pid}, {event.process})" if event.pid or event.process else ""
        out.append(
            Finding(
                node=node,
                check="xid",
                reason=f"Xid{event.code}",
                severity=event.severity,
                component=gpu,
                xid=event.code,
                evidence=f"{event.fault_class}: {event.message}{who}".strip(),
                observed_at=event.timestamp or now,
                pid=event.pid,
                process=event.process,
            )
        )
    return out
