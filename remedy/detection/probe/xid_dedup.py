"""One Xid, two witnesses: NVML pushes it as an event and the driver writes it to the kernel log.
Both are read (either can miss it: NVML may not deliver, the log may be unreadable), and the
same Xid counts once."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta

from remedy.core.models import Finding
from remedy.xid.kernel_log import normalize_pci

# How far apart the two sightings of one Xid may be: the kernel log is read at the next probe,
# up to an interval after the event; twice the agent's default interval and then some.
DEDUP_WINDOW = timedelta(minutes=5)

XidKey = tuple[int, str]


def xid_key(finding: Finding) -> XidKey | None:
    """The Xid and its GPU, by PCI address (both witnesses know it) else by index or UUID."""
    if finding.xid is None:
        return None
    gpu = finding.component
    if gpu.pci_bus_id:
        return finding.xid, normalize_pci(gpu.pci_bus_id)
    return finding.xid, f"index:{gpu.index}" if gpu.index is not None else f"uuid:{gpu.uuid}"


class XidDedup:
    """Pairs sightings across sources, one to one: an NVML event cancels one kernel-log line of
    the same Xid on the same GPU seen within the window, and the other way round. Two real
    occurrences (two events, two lines) are two Xids.

    >>> from datetime import UTC
    >>> from remedy.core.models import Component, ComponentKind, Severity
    >>> t = datetime(2026, 11, 30, tzinfo=UTC)
    >>> gpu = Component(kind=ComponentKind.GPU, pci_bus_id="00000000:5A:00.0")
    >>> xid79 = Finding(node="n", check="xid", reason="Xid79", severity=Severity.CRITICAL,
    ...                 component=gpu, xid=79, observed_at=t)
    >>> seen = XidDedup()
    >>> len(seen.admit([xid79], "nvml", t)), len(seen.admit([xid79], "kernel_log", t))
    (1, 0)
    >>> len(seen.admit([xid79], "kernel_log", t))  # a second line: the Xid happened again
    1
    """

    def __init__(self, window: timedelta = DEDUP_WINDOW) -> None:
        self._window = window
        self._lock = threading.Lock()  # the probe loop and probe activities share one
        self._unpaired: list[tuple[str, XidKey, datetime]] = []

    def admit(self, findings: Iterable[Finding], source: str, now: datetime) -> list[Finding]:
        """``findings`` less the Xids another source already reported."""
        out = []
        with self._lock:
            self._unpaired = [u for u in self._unpaired if now - u[2] <= self._window]
            for finding in findings:
                key = xid_key(finding)
                if key is None:
                    out.append(finding)
                    continue
                twin = next((u for u in self._unpaired if u[0] != source and u[1] == key), None)
                if twin is not None:
                    self._unpaired.remove(twin)
                    continue
                self._unpaired.append((source, key, now))
                out.append(finding)
        return out
