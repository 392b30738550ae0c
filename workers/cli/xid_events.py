"""How `remedy xid parse` shows an Xid or SXid event: a line for a person, or a JSON object."""

from __future__ import annotations

import json

from remedy.xid.kernel_log import XidEvent
from remedy.xid.nvswitch import SXidEvent

_SOURCES = {"fallen_off_bus": "GPU fell off the bus, no Xid line"}


def event_line(event: XidEvent | SXidEvent) -> str:
    """``line 12: Xid 94 on 0000:01:00 GPU-I:05 GPU-UUID pid=7194 python3: memory → restart_app
    (catalog: RESTART_APP)``; an SXid names its switch and fatality instead."""
    if isinstance(event, SXidEvent):
        return (
            f"line {event.line}: SXid {event.code:05d} {event.fatality.replace('_', '-')} on "
            f"nvidia-{event.switch} (PCI {event.pci_bus_id}): {event.message} → {event.action}"
        )
    where = [event.pci_bus_id]
    if event.gpu_instance is not None:
        where.append(f"GPU-I:{event.gpu_instance:02d}")
    if event.compute_instance is not None:
        where.append(f"GPU-CI:{event.compute_instance:02d}")
    if event.gpu_uuid:
        where.append(event.gpu_uuid)
    if event.pid is not None:
        where.append(f"pid={event.pid}")
    if event.process:
        where.append(f"process={event.process}")
    what = f"Xid {event.code}"
    if event.source != "xid":
        what += f" ({_SOURCES.get(event.source, event.source)})"
    return (
        f"line {event.line}: {what} on {' '.join(where)}: "
        f"{event.fault_class} → {event.action} ({event.action_reason})"
    )


def event_json(event: XidEvent | SXidEvent) -> str:
    kind = "sxid" if isinstance(event, SXidEvent) else "xid"
    return json.dumps({"kind": kind, **event.model_dump(mode="json")})
