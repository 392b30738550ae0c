"""RDMA port error counters as counts over a trailing window, with their thresholds.

A counter is cumulative: one reading says nothing, two say how many errors happened between
them. ``CounterHistory`` keeps each port's readings for the last hour (the agent's probe loop
shares one); a check asks it how much a counter rose over a threshold's span. A value below
the previous one is a reset (driver reload, ``perfquery -R``): the new value is the increase
since it (NVSentinel's NIC monitor design, "Counter Reset Handling"). The InfiniBand PMA
counters are narrow (``symbol_error`` 16 bits, ``link_downed`` 8, ``local_link_integrity_errors``
4: linux drivers/infiniband/core/sysfs.c, ``PORT_PMA_ATTR``) and stop at all ones instead of
wrapping (IBA PortCounters): a counter pinned at its maximum counts nothing more, so it is
reported as unreadable, never as quiet.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta

from remedy.detection.probe.nics import PortCounters

WINDOW = timedelta(hours=1)  # the longest span a threshold looks back


@dataclass(frozen=True)
class Threshold:
    """More than ``limit`` increases of ``counter`` within ``per`` is a finding."""

    counter: str
    limit: int
    per: timedelta
    says: str  # the threshold as a person reads it
    source: str  # where the number comes from
    bits: int | None = None  # the counter's width where it saturates (PMA); None: 64-bit


_IBTA = "IBTA BER 1e-12, as NVSentinel's NIC monitor design (046-link-counter-detection) cites"
_NVS = "NVSentinel NIC monitor design (046-link-counter-detection): fatal on any rise"
# The flap rule: NVSentinel's analyzer escalates repeated link_downed (RepeatedNICLinkFlap);
# remedy counts three downs within the hour (issue 54: "3 degradations in 1 h escalate").
FLAPS_TO_ESCALATE = 3

SYMBOL_ERRORS = Threshold("symbol_error", 120, WINDOW, "more than 120 an hour", _IBTA, bits=16)
LINK_DOWNED = Threshold(
    "link_downed",
    0,
    WINDOW,
    f"any rise in the hour ({FLAPS_TO_ESCALATE}+: flapping)",
    "NVSentinel NIC monitor design: a down kills the job's queue pairs (046); repeated downs "
    "escalate (047, RepeatedNICLinkFlap: 3 in 10 minutes; remedy counts the hour)",
    bits=8,
)
LINK_RETRAINS = Threshold(
    "link_error_recovery",
    5,
    timedelta(minutes=1),
    "more than 5 a minute",
    "NVSentinel NIC monitor design (046), after Azure HPC health checks",
    bits=8,
)
RCV_ERRORS = Threshold(
    "port_rcv_errors",
    600,
    timedelta(minutes=1),
    "more than 10 a second",
    "NVSentinel NIC monitor design (046), after NADDOD",
    bits=16,
)
INTEGRITY = Threshold("local_link_integrity_errors", 0, WINDOW, "any rise", _NVS, bits=4)
OVERRUN = Threshold("excessive_buffer_overrun_errors", 0, WINDOW, "any rise", _NVS, bits=4)
# EFA (hw_counters): no published threshold. A retransmit that timed out moved SRD traffic to
# another path (Nitro v4+); remedy's choice, tune it per fleet.
EFA_RETRANS_TIMEOUTS = Threshold(
    "retrans_timeout_events",
    60,
    WINDOW,
    "more than 60 an hour",
    "remedy's choice (AWS efa driver network stats; no published threshold)",
)

# The counters each kind of port must have: the PMA set on InfiniBand and RoCE ports
# (counters/), the always-present port stats on EFA (hw_counters/, efa_verbs.c).
IB_COUNTERS = tuple(
    t.counter for t in (SYMBOL_ERRORS, LINK_DOWNED, LINK_RETRAINS, RCV_ERRORS, INTEGRITY, OVERRUN)
)
EFA_COUNTERS = ("rx_drops", "rdma_read_wr_err")
EFA_OPTIONAL = (EFA_RETRANS_TIMEOUTS.counter,)  # Nitro v4 and later only
THRESHOLDS = (SYMBOL_ERRORS, LINK_DOWNED, LINK_RETRAINS, RCV_ERRORS, INTEGRITY, OVERRUN)
ALL_THRESHOLDS = (*THRESHOLDS, EFA_RETRANS_TIMEOUTS)


def saturated(counter: str, value: int) -> bool:
    bits = next((t.bits for t in ALL_THRESHOLDS if t.counter == counter), None)
    return bits is not None and value >= (1 << bits) - 1


class CounterHistory:
    """Each port's counter readings over the last ``window``: how much a counter rose."""

    def __init__(self, window: timedelta = WINDOW) -> None:
        self.window = window
        # (port, counter) → (when, increase since first seen); the raw last value beside.
        self._seen: dict[tuple[str, str], deque[tuple[datetime, int]]] = {}
        self._last: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()  # the probe loop and probe activities share one

    def observe(self, reading: PortCounters, at: datetime) -> None:
        with self._lock:
            for counter, value in reading.values.items():
                key = (reading.name, counter)
                samples = self._seen.setdefault(key, deque())
                last = self._last.get(key)
                rose = 0 if last is None else (value - last if value >= last else value)
                total = samples[-1][1] + rose if samples else 0
                self._last[key] = value
                samples.append((at, total))
                # Keep one sample at or before the window's start: the baseline of its span.
                while len(samples) > 1 and samples[1][0] <= at - self.window:
                    samples.popleft()

    def increase(
        self, port: str, counter: str, per: timedelta, now: datetime, scaled: bool = True
    ) -> float | None:
        """How much ``counter`` rose over the last ``per`` (None: fewer than two readings).
        Measured from the newest reading at or before ``now - per``; a longer span (readings
        further apart than ``per``) is scaled down to ``per`` (``scaled``: a rate; not for a
        count of events, which all happened since that reading); a shorter one (a young
        history) is not scaled up: a lower bound, never a guess."""
        with self._lock:
            samples = list(self._seen.get((port, counter), ()))
        if len(samples) < 2:
            return None
        start = now - per
        base = next((s for s in reversed(samples) if s[0] <= start), samples[0])
        if base is samples[-1]:
            base = samples[-2]
        rose = samples[-1][1] - base[1]
        span = samples[-1][0] - base[0]
        return rose * min(1.0, per / span) if scaled and span > per else float(rose)

    def downs(self, port: str, now: datetime) -> int:
        """How many times the link went down within the window (link_downed's rises)."""
        rose = self.increase(port, LINK_DOWNED.counter, self.window, now, scaled=False)
        return int(rose or 0)
