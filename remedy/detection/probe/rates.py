"""Error counters read as rates. A link's error counter only grows, from the last reset; its
value alone says nothing (a week-old node has more than a new one). What matters is how fast
it grows, so each counter's samples are kept over a window and the probe judges the increase
and the rate over the span the window holds.

A probe that has no earlier sample of a counter (the agent just started, the GPU was reset and
its counters went back to zero, the last probe is older than the window) takes two samples a
short gap apart (``first_gap_s``) instead of reporting nothing: a fault must not look healthy
because the window is empty.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime, timedelta

# Long enough to hold several probes at the agent's default interval (30 s), short enough that
# a burst that stopped stops being reported within minutes.
RATE_WINDOW = timedelta(minutes=5)
FIRST_GAP_S = 1.0  # DCGM's NVLink CRC threshold is per second: one second is the least span


@dataclass(frozen=True)
class Rate:
    """How much a counter grew, over how long."""

    increase: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.increase / self.seconds

    def __str__(self) -> str:
        return f"+{self.increase} in {self.seconds:.3g}s ({self.per_second:.3g}/s)"


class CounterWindow:
    """Each counter's samples within ``window``, by key, shared by the probes of one node (the
    agent's loop and the probe activities: hence the lock).

    >>> from datetime import UTC
    >>> t = datetime(2026, 12, 7, tzinfo=UTC)
    >>> w = CounterWindow()
    >>> w.add("crc", 10, t) is None  # the first sample: no rate yet
    True
    >>> str(w.add("crc", 310, t + timedelta(seconds=2)))
    '+300 in 2s (150/s)'
    >>> w.add("crc", 0, t + timedelta(seconds=3)) is None  # reset: the counter went back
    True
    """

    def __init__(self, window: timedelta = RATE_WINDOW, first_gap_s: float = FIRST_GAP_S) -> None:
        self.window = window
        self.first_gap_s = first_gap_s
        self._lock = threading.Lock()
        self._samples: dict[Hashable, deque[tuple[datetime, int]]] = {}

    def add(self, key: Hashable, value: int, at: datetime) -> Rate | None:
        """Keep the sample; answer the growth since the oldest sample in the window, or None
        when there is none earlier (first sight, or the counter went back: it was reset)."""
        with self._lock:
            samples = self._samples.setdefault(key, deque())
            if samples and value < samples[-1][1]:
                samples.clear()
            while samples and at - samples[0][0] > self.window:
                samples.popleft()
            first = samples[0] if samples else None
            samples.append((at, value))
            if first is None or at <= first[0]:
                return None
            return Rate(value - first[1], (at - first[0]).total_seconds())
