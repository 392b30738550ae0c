"""Parse NVIDIA Xid events out of a kernel log (dmesg, /dev/kmsg, journald text).

Handles the real shapes (``remedy.xid.lines``): with or without ``PCI:``, MIG ``GPU-I``/``GPU-CI``
tags, the ``pid=``/``name=`` fields of each driver era, dmesg ``[uptime]``, kmsg
``prio,seq,usec,-;`` and ISO-timestamped journald lines. ``NVRM: GPU at PCI:…: GPU-<uuid>`` lines
map a bus id to a GPU for the lines after them, as the driver means them. A GPU that fell off the
bus without an Xid is an Xid 79 event too. Anything else, malformed Xid lines included, is
skipped — a parser that crashes would blind the probe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, computed_field

from remedy.core.models import Severity
from remedy.xid.actions import SEVERITY, XidAction
from remedy.xid.catalog import XidCatalog, load_catalog
from remedy.xid.decode import decode_action
from remedy.xid.lines import (
    FALLEN_OFF,
    XidLine,
    fallen_off_bus,
    gpu_at,
    normalize_pci,
    not_from_the_kernel,
    probe_gpu,
    probe_lost,
    timestamp,
    uptime,
    xid_line,
)
from remedy.xid.nvswitch import SXidEvent, parse_sxids

__all__ = ["KernelLogSource", "XidEvent", "normalize_pci", "parse_kernel_log", "scan_kernel_log"]

GPU_LOST = 79  # ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
CLEANUP = 45  # ROBUST_CHANNEL_PREEMPTIVE_REMOVAL: a channel torn down after another error
# The driver prints Xid 79 and its `GPU … has fallen off the bus.` line in one burst.
_BURST_S = 60.0
_BURST_LINES = 10  # when the lines carry no clock
_PROBE_LINES = 3  # the probe-time message is three physical lines


class KernelLogSource(Protocol):
    """Where the probe reads kernel-log lines for Xids, on every probe (``adapters.host``)."""

    def read_new(self) -> list[str]:
        """Complete lines that appeared since the last call; ``OSError`` when it cannot read."""
        ...


class XidEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: int
    pci_bus_id: str  # domain:bus:device, lower case
    gpu_instance: int | None = None  # MIG `GPU-I:nn` (decimal)
    compute_instance: int | None = None  # MIG `GPU-CI:nn` (decimal)
    pid: int | None = None
    process: str | None = None
    gpu_uuid: str | None = None
    message: str = ""
    fault_class: str
    action: XidAction  # final: the catalog's, or what the message says (Xid 154, 74, 144–150, 45)
    action_reason: str = ""  # one line: why this action
    severity: Severity
    source: str = "xid"  # xid | fallen_off_bus (the driver's line without an Xid number)
    line: int  # 1-based line number in the input
    timestamp: datetime | None = None  # wall clock, when the log line carries one
    uptime_s: float | None = None  # seconds since boot (dmesg, kmsg)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recommended_action(self) -> str:
        """The action's value, under the name older callers and JSON readers use."""
        return self.action.value


def parse_kernel_log(
    lines: Iterable[str],
    catalog: XidCatalog | None = None,
    architecture: int | Mapping[str, int] | None = None,
) -> list[XidEvent]:
    """Every Xid event in ``lines``. ``architecture`` is the NVML architecture of every GPU, or
    per PCI id where the GPUs differ (any PCI format)."""
    catalog = catalog or load_catalog()
    archs = (
        {normalize_pci(pci): arch for pci, arch in architecture.items()}
        if isinstance(architecture, Mapping)
        else architecture
    )
    return _Scan(catalog, archs).run(lines)


def scan_kernel_log(
    lines: Iterable[str],
    catalog: XidCatalog | None = None,
    architecture: int | Mapping[str, int] | None = None,
) -> list[XidEvent | SXidEvent]:
    """Xid and NVSwitch SXid events together, in log order."""
    lines = list(lines)
    both: list[XidEvent | SXidEvent] = [
        *parse_kernel_log(lines, catalog, architecture),
        *parse_sxids(lines),
    ]
    return sorted(both, key=lambda event: event.line)


class _Scan:
    """One pass over the log, keeping what earlier lines said: the UUID of each bus id, the
    last Xid 79 of each GPU, a probe-time message's first line."""

    def __init__(self, catalog: XidCatalog, archs: int | dict[str, int] | None) -> None:
        self.catalog, self.archs = catalog, archs
        self.uuids: dict[str, str] = {}
        self.lost: dict[str, XidEvent] = {}  # bus id → its last Xid 79
        self.last: dict[str, XidEvent] = {}  # bus id → its last Xid other than 45
        self.probe: tuple[str, int, str] | None = None  # bus id, line number, line
        self.events: list[XidEvent] = []

    def run(self, lines: Iterable[str]) -> list[XidEvent]:
        for number, line in enumerate(lines, start=1):
            if not_from_the_kernel(line):
                continue
            if parsed := xid_line(line):
                event = self.event(parsed.code, parsed.pci, parsed.message, number, line, parsed)
                self.events.append(self.not_solo(event))
                if event.code == GPU_LOST:
                    self.lost[event.pci_bus_id] = event
                if event.code != CLEANUP:
                    self.last[event.pci_bus_id] = event
            elif mapping := gpu_at(line):
                self.uuids[mapping[0]] = mapping[1]
            elif pci := fallen_off_bus(line):
                self.fallen_off(pci, number, line)
            elif pci := probe_gpu(line):
                self.probe = (pci, number, line)
            elif self.probe and probe_lost(line):
                pci, first, first_line = self.probe
                self.probe = None
                if number - first < _PROBE_LINES:
                    self.fallen_off(pci, first, first_line)
        return self.events

    def not_solo(self, event: XidEvent) -> XidEvent:
        """An Xid 45 right after another Xid on its GPU is that Xid's cleanup: NVIDIA's
        WORKFLOW_XID_45 "Not Solo: IGNORE (follow other Xid)" — also on drivers before
        570.123.01, which never name the cause in the line."""
        before = self.last.get(event.pci_bus_id)
        if (
            event.code != CLEANUP
            or event.action is not XidAction.RESTART_FABRIC_MANAGER
            or before is None
            or not _same_burst(before, event)
        ):
            return event
        return event.model_copy(
            update={
                "action": XidAction.IGNORE,
                "severity": SEVERITY[XidAction.IGNORE],
                "action_reason": f"Xid 45: follows Xid {before.code} on this GPU (line "
                f"{before.line}): not solo, that Xid's action applies",
            }
        )

    def fallen_off(self, pci: str, number: int, line: str) -> None:
        """The driver's line for a lost GPU: the same event as an Xid 79 just before it for
        that GPU, else an Xid 79 of its own."""
        event = self.event(GPU_LOST, pci, FALLEN_OFF, number, line)
        xid = self.lost.get(pci)
        if xid is None or not _same_burst(xid, event):
            self.events.append(event)

    def event(
        self, code: int, pci: str, message: str, number: int, line: str, xid: XidLine | None = None
    ) -> XidEvent:
        """The event for ``code`` on ``pci``: from an Xid line's fields, or (no ``xid``) the
        driver's fallen-off-the-bus line."""
        arch = self.archs.get(pci) if isinstance(self.archs, dict) else self.archs
        info = self.catalog.lookup(code, arch)
        decoded = decode_action(info, message)
        return XidEvent(
            code=code,
            pci_bus_id=pci,
            gpu_uuid=self.uuids.get(pci),
            message=message,
            fault_class=info.fault_class,
            action=decoded.action,
            action_reason=decoded.reason,
            severity=info.severity_for(decoded.action),
            source="xid" if xid else "fallen_off_bus",
            gpu_instance=xid.gpu_instance if xid else None,
            compute_instance=xid.compute_instance if xid else None,
            pid=xid.pid if xid else None,
            process=xid.process if xid else None,
            line=number,
            timestamp=timestamp(line),
            uptime_s=uptime(line),
        )


def _same_burst(xid: XidEvent, lost: XidEvent) -> bool:
    """``lost`` follows ``xid`` in the same burst (the driver's fallen-off line after its
    Xid 79, a 45 after the Xid that tore the channel down); after a reboot (uptime restarts)
    or minutes later it is an event of its own."""
    if xid.uptime_s is not None and lost.uptime_s is not None:
        return 0 <= lost.uptime_s - xid.uptime_s <= _BURST_S
    if xid.timestamp is not None and lost.timestamp is not None:
        return 0 <= (lost.timestamp - xid.timestamp).total_seconds() <= _BURST_S
    return lost.line - xid.line <= _BURST_LINES
