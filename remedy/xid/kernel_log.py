"""Parse NVIDIA Xid lines out of a kernel log (dmesg, /dev/kmsg, journald text).

Handles the real shapes: with or without ``PCI:``, ``pid=``/``name=`` fields or
``'<unknown>'``, dmesg ``[uptime]``, kmsg ``prio,seq,usec,-;`` and ISO-timestamped journald
lines, and ``NVRM: GPU at PCI:…: GPU-<uuid>`` lines that map a bus id to a GPU. Anything else,
malformed Xid lines included, is skipped — a parser that crashes would blind the probe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from remedy.models import Severity
from remedy.xid.catalog import XidCatalog, load_catalog


class KernelLogSource(Protocol):
    """Where the probe reads kernel-log lines for Xids, on every probe (``adapters.host``)."""

    def read_new(self) -> list[str]:
        """Complete lines that appeared since the last call; ``OSError`` when it cannot read."""
        ...


_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?\): (?P<code>\d{1,4})(?:,\s*(?P<rest>.*))?$"
)
_GPU_AT = re.compile(
    r"NVRM: GPU at PCI:(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?: (?P<uuid>GPU-[0-9a-fA-F-]+)"
)
_PID = re.compile(r"pid=(?:'?<unknown>'?|(?P<pid>\d+))(?:,\s*|$)")
_NAME = re.compile(r"name=(?P<name>'?<unknown>'?|[^,]*)(?:,\s*|$)")
_ISO = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))\s")
_UPTIME = re.compile(r"\[\s*(?P<up>\d+\.\d+)\]")
_KMSG = re.compile(r"^\d+,\d+,(?P<usec>\d+),[^;]*;")


class XidEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: int
    pci_bus_id: str  # domain:bus:device, lower case
    pid: int | None = None
    process: str | None = None
    gpu_uuid: str | None = None
    message: str = ""
    fault_class: str
    recommended_action: str
    severity: Severity
    line: int  # 1-based line number in the input
    timestamp: datetime | None = None  # wall clock, when the log line carries one
    uptime_s: float | None = None  # seconds since boot (dmesg, kmsg)


def normalize_pci(bus_id: str) -> str:
    """``00000000:5A:00.0`` (NVML) and ``PCI:0000:5a:00`` (kernel log) → ``0000:5a:00``."""
    parts = bus_id.lower().removeprefix("pci:").split(":")
    if len(parts) < 3:
        return bus_id.lower()
    return f"{parts[-3][-4:]:0>4}:{parts[-2]}:{parts[-1].split('.')[0]}"


def parse_kernel_log(
    lines: Iterable[str], catalog: XidCatalog | None = None, architecture: int | None = None
) -> list[XidEvent]:
    """Every Xid event in ``lines``, with GPU UUIDs filled in from ``GPU at PCI`` lines
    wherever they appear in the log."""
    catalog = catalog or load_catalog()
    lines = list(lines)
    uuids = {m["pci"].lower(): m["uuid"] for line in lines if (m := _GPU_AT.search(line))}
    events = []
    for number, line in enumerate(lines, start=1):
        event = parse_xid_line(line, number, catalog, architecture, uuids)
        if event is not None:
            events.append(event)
    return events


def parse_xid_line(
    line: str, number: int, catalog: XidCatalog, architecture: int | None, uuids: dict[str, str]
) -> XidEvent | None:
    match = _XID.search(line.rstrip("\r\n"))
    if match is None:
        return None
    code, pci = int(match["code"]), match["pci"].lower()
    rest = match["rest"] or ""
    pid_match, name_match = _PID.search(rest), _NAME.search(rest)
    pid = int(pid_match["pid"]) if pid_match and pid_match["pid"] else None
    name = name_match["name"].strip() if name_match else None
    process = None if name is None or "<unknown>" in name else name
    message = _NAME.sub("", _PID.sub("", rest)).strip()
    info = catalog.lookup(code, architecture)
    return XidEvent(
        code=code,
        pci_bus_id=pci,
        pid=pid,
        process=process,
        gpu_uuid=uuids.get(pci),
        message=message,
        fault_class=info.fault_class,
        recommended_action=info.action.value,
        severity=info.severity,
        line=number,
        timestamp=_timestamp(line),
        uptime_s=_uptime(line),
    )


def _timestamp(line: str) -> datetime | None:
    match = _ISO.match(line)
    if not match:
        return None
    try:
        return datetime.fromisoformat(match["ts"].replace("Z", "+00:00"))
    except ValueError:
        return None


def _uptime(line: str) -> float | None:
    if kmsg := _KMSG.match(line):
        return int(kmsg["usec"]) / 1e6
    if dmesg := _UPTIME.search(line):
        return float(dmesg["up"])
    return None
