"""The DCGM seams of the probe: DCGM's health watches (``dcgmi health -c -j``) and
dcgm-exporter's metrics, as the node answers them (``adapters.host.dcgm_health`` runs dcgmi and
fetches the metrics; the simulation answers for its nodes), and the exporter's last reading,
kept across probes."""

from __future__ import annotations

import threading
from typing import Protocol

from remedy.detection.dcgm_exporter import LastXid, new_xids


class HealthUnreadable(Exception):
    """dcgmi did not answer, failed, or printed what is not its health report."""


class NotWatched(HealthUnreadable):
    """The host engine has no health watches set for the group."""


class HealthSource(Protocol):
    def check(self) -> str:
        """``dcgmi health -c -j``'s JSON; raise NotWatched or HealthUnreadable."""
        ...


class MetricsUnreadable(Exception):
    """The exporter did not answer in time, refused, or answered too much."""


class MetricsSource(Protocol):
    def fetch(self) -> str:
        """The exporter's exposition text; raise MetricsUnreadable."""
        ...


class ExporterReadings:
    """The exporter's last Xid per GPU, kept across probes (one per agent)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, LastXid] | None = None  # None: no reading yet (the baseline)

    def changed(self, now: dict[str, LastXid]) -> list[LastXid]:
        """The GPUs whose last Xid changed to a code since the last reading (none at the
        first: it is the baseline); ``now`` is kept."""
        with self._lock:
            found, self._last = new_xids(self._last, now), dict(now)
        return found
