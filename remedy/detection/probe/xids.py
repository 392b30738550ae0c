"""Xid events (from NVML or the kernel log) as findings."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from remedy.core.models import Component, ComponentKind, Finding
from remedy.xid.kernel_log import XidEvent, normalize_pci


def xid_findings(
    node: str,
    events: Iterable[XidEvent],
    not_before: datetime | None,
    now: datetime,
    gpus: Iterable[Component] = (),
) -> list[Finding]:
    """One finding per event, skipping events logged before ``not_before`` (an earlier boot:
    the reboot that a ladder just finished must not start it again). Each carries the event's
    final action (what the message asked for, else the catalog's), which routes it to a
    runbook, and that action's severity: an ignore is informational, never a remediation."""
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
        out.append(
            Finding(
                node=node,
                check="xid",
                reason=f"Xid{event.code}",
                severity=event.severity,
                component=gpu,
                xid=event.code,
                evidence=_evidence(event),
                observed_at=event.timestamp or now,
                pid=event.pid,
                process=event.process,
                nvidia_action=event.action.value,
                gpu_instance=event.gpu_instance,
            )
        )
    return out


def _evidence(event: XidEvent) -> str:
    """What the line said, where (a MIG instance: an application's own slice of the GPU) and
    why this action, e.g. ``memory: … on MIG GPU-I 5 (pid 4242, python); restart_app: catalog:
    RESTART_APP``."""
    where = ""
    if event.gpu_instance is not None:
        where = f" on MIG GPU-I {event.gpu_instance}"
        if event.compute_instance is not None:
            where += f" GPU-CI {event.compute_instance}"
    who = f" (pid {event.pid}, {event.process})" if event.pid or event.process else ""
    why = f"; {event.action.value}: {event.action_reason}" if event.action_reason else ""
    return f"{event.fault_class}: {event.message}{where}{who}{why}".strip()
