"""The NVIDIA driver's kernel-log lines, one at a time: what each shape says, nothing more.

Formats are the driver's printf strings (open-gpu-kernel-modules ``kernel_rc.c``
``krcReportXid_IMPL`` / ``_krcLogUuidOnce``, ``osinit.c`` ``osHandleGpuLost``, ``osapi.c``) and
the older closed-driver forms seen in real logs. Every function returns ``None`` for a line it
cannot read rather than raising: the caller skips it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_HEX4, _HEX2 = "[0-9a-fA-F]{4}", "[0-9a-fA-F]{2}"
# A bus id as the driver prints it (domain:bus:device), then an optional `.function`.
PCI = rf"(?P<pci>{_HEX4}:{_HEX2}:{_HEX2})(?:\.[0-9a-fA-F])?"
_BDF = rf"(?P<pci>(?:{_HEX4}:)?{_HEX2}:{_HEX2})\.[0-9a-fA-F]"  # with the PCI function

# `NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 94, …` — GI/CI are `%02u`: decimal, not hex.
# The `.F` after the device is tolerated for trace-event and third-party copies.
_XID = re.compile(
    rf"NVRM: Xid \((?:PCI:)?{PCI}"
    r"(?: GPU-I:(?P<gi>\d{1,6}))?(?: GPU-CI:(?P<ci>\d{1,6}))?"
    r"\): (?P<code>\d{1,6})(?:,\s*(?P<rest>.*))?$"
)
# pid and name are each optional and in this order: R515–R565 print both (`pid='<unknown>',
# name=<unknown>` when unknown), R570+ both or neither, pre-R515 `pid=N` alone or nothing.
# A name may hold spaces and colons (`KMS thread`, `nvc:[driver]`): it runs to the first `, `.
_PID = re.compile(r"pid=(?:'?<unknown>'?|(?P<pid>\d{1,10}))(?:, |,?\s*$)")
_NAME = re.compile(r"name=(?P<name>.*?)(?:, |,?\s*$)")
# The UUID map printed once before a GPU's first Xid; anchored on `: GPU-<uuid>` so the
# `GPU at 0000:01:00.0 has fallen off the bus.` and scheduler lines never match.
_GPU_AT = re.compile(rf"NVRM: GPU at (?:PCI:)?{PCI}: (?P<uuid>GPU-[0-9a-fA-F-]+)\s*$")
# The GPU lost without an Xid number, in its three driver forms (see `fallen_off_bus`).
_DEV_LOST = re.compile(rf"NVRM: GPU {_BDF}: GPU has fallen off the bus\.")
_OLD_LOST = re.compile(rf"NVRM: GPU at {_BDF} has fallen off the bus\.")
_PROBE_GPU = re.compile(rf"NVRM: The NVIDIA GPU {_BDF}\s*$")
# The same message as ONE record: the driver prints its three lines in one call, so /dev/kmsg
# holds them as one record with the newlines escaped (`\x0a`), rsyslog may write `#012`.
_PROBE_RECORD = re.compile(
    rf"NVRM: The NVIDIA GPU {_BDF}(?:\\x0a|#012)"
    r".{0,200}?fallen off the bus and is not responding to commands\."
)
_PROBE_LOST = re.compile(r"NVRM: fallen off the bus and is not responding to commands\.")
FALLEN_OFF = "GPU has fallen off the bus."

_ISO = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))\s")
_UPTIME = re.compile(r"\[\s*(?P<up>\d{1,12}\.\d{1,9})\]")
_KMSG = re.compile(r"^\d+,\d+,(?P<usec>\d{1,20}),[^;]*;")


@dataclass(frozen=True)
class XidLine:
    """The fields of one ``NVRM: Xid (…)`` line, as printed."""

    pci: str
    code: int
    gpu_instance: int | None
    compute_instance: int | None
    pid: int | None
    process: str | None
    message: str


# A syslog header (`Dec  1 03:00:00 host TAG[pid]: `, or ISO time as journald short-iso and
# rsyslog write it): the TAG says which program wrote the line.
_SYSLOG_TAG = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)"
    r" \S+ (?P<tag>[^\s:\[]+)(?:\[\d+\])?: "
)


def not_from_the_kernel(line: str) -> bool:
    """A ``#`` line (annotated logs, test corpora), or a syslog line another program wrote:
    `logger` (any user) or an agent echoing what it saw must not look like the driver."""
    if line.startswith("#"):
        return True
    header = _SYSLOG_TAG.match(line)
    return header is not None and header["tag"] != "kernel"


def normalize_pci(bus_id: str) -> str:
    """``00000000:5A:00.0`` (NVML) and ``PCI:0000:5a:00`` (kernel log) → ``0000:5a:00``;
    ``18:00.0`` (no domain) → ``0000:18:00``."""
    parts = bus_id.lower().removeprefix("pci:").split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) < 3:
        return bus_id.lower()
    return f"{parts[-3][-4:]:0>4}:{parts[-2]}:{parts[-1].split('.')[0]}"


# A kernel record is at most about 1 KiB (printk's line limit); a longer "line" is not one, and
# bounding it keeps every pattern here fast on whatever a log file holds.
MAX_LINE = 4096


def xid_line(line: str) -> XidLine | None:
    match = _XID.search(line[:MAX_LINE].rstrip("\r\n"))
    if match is None:
        return None
    rest = match["rest"] or ""
    pid = process = None
    if found := _PID.match(rest):
        pid = int(found["pid"]) if found["pid"] else None
        rest = rest[found.end() :]
    if found := _NAME.match(rest):
        name = found["name"].strip()
        process = None if not name or "<unknown>" in name else name
        rest = rest[found.end() :]
    return XidLine(
        pci=normalize_pci(match["pci"]),
        code=int(match["code"]),
        gpu_instance=_int(match["gi"]),
        compute_instance=_int(match["ci"]),
        pid=pid,
        process=process,
        message=rest.strip(),
    )


def gpu_at(line: str) -> tuple[str, str] | None:
    """``(pci, uuid)`` from a ``NVRM: GPU at PCI:…: GPU-<uuid>`` line."""
    match = _GPU_AT.search(line)
    return (normalize_pci(match["pci"]), match["uuid"]) if match else None


def fallen_off_bus(line: str) -> str | None:
    """The PCI id of a GPU the single-line forms say has fallen off the bus: the driver's
    ``NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.`` (after an Xid 79 or alone) and the
    old closed driver's ``NVRM: GPU at 0000:01:00.0 has fallen off the bus.``, and the
    probe-time message when it arrives as one record (``/dev/kmsg``)."""
    match = _DEV_LOST.search(line) or _OLD_LOST.search(line) or _PROBE_RECORD.search(line)
    return normalize_pci(match["pci"]) if match else None


def probe_gpu(line: str) -> str | None:
    """The PCI id on the first line of the driver's three-line probe-time message
    (``The NVIDIA GPU 0000:b3:00.0`` / ``(PCI ID: …) installed in this system has`` /
    ``fallen off the bus and is not responding to commands.``)."""
    match = _PROBE_GPU.search(line)
    return normalize_pci(match["pci"]) if match else None


def probe_lost(line: str) -> bool:
    """The third line of that message: the GPU named two lines up is gone."""
    return _PROBE_LOST.search(line) is not None


def timestamp(line: str) -> datetime | None:
    """The wall clock of an ISO-timestamped (journald short-iso) line; syslog and ``dmesg -T``
    times carry no year or zone and are left out rather than guessed."""
    match = _ISO.match(line)
    if not match:
        return None
    try:
        return datetime.fromisoformat(match["ts"].replace("Z", "+00:00"))
    except ValueError:
        return None


def uptime(line: str) -> float | None:
    """Seconds since boot: kmsg's microseconds or dmesg's ``[seconds]``."""
    if kmsg := _KMSG.match(line):
        return int(kmsg["usec"]) / 1e6
    if dmesg := _UPTIME.search(line):
        return float(dmesg["up"])
    return None


def _int(digits: str | None) -> int | None:
    return int(digits) if digits else None
