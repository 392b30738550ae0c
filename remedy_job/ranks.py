"""Each rank's step times, summarised once a minute: what remedy's straggler detector reads
(remedy/detection/stragglers/scores.py). Standard library only.

A rank's line is ``remedy.io/progress {"event":"rank","at":...,"rank":13,"local_rank":5,
"gpu":"GPU-...","step":1200,"steps":30,"compute_s":0.412,"data_s":0.010}``: the medians of the
``steps`` steps since its last line (a median: one slow step moves it by nothing).

- ``compute_s`` is the rank's **own work** per step, WITHOUT the time it waits in collectives:
  a lockstep job's wall time per step is the same on every rank (the fast ones wait in the
  all-reduce for the slow one), so only the time before the wait tells who is slow. Time it
  with CUDA events around forward and backward (and the optimizer), on the rank's stream.
- ``data_s`` is the rank's wait for its next batch (the data loader).

A line is printed with the first step after each minute of the clock, so every rank's summary
of one minute carries the same minute (ranks' clocks agree to far better than that under NTP):
the detector compares the ranks within a minute, never across minutes."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from statistics import median


class RankTimes:
    """The steps since the last line, and when the next is due.

    >>> from datetime import UTC
    >>> t = RankTimes(timedelta(minutes=1))
    >>> t0 = datetime(2026, 1, 1, 12, 0, 50, tzinfo=UTC)
    >>> [t.add(t0 + timedelta(seconds=s), s, c, 0.01) for s, c in ((0, 0.4), (5, 0.9), (9, 0.4))]
    [None, None, None]
    >>> t.add(t0 + timedelta(seconds=11), 11, 0.4, 0.01)  # a new minute: the last one's medians
    {'step': 9, 'steps': 3, 'compute_s': 0.4, 'data_s': 0.01}
    """

    def __init__(self, every: timedelta) -> None:
        self._every = every.total_seconds()
        self._period: int | None = None  # the clock's period the current batch belongs to
        self._compute: list[float] = []
        self._data: list[float] = []
        self._step = 0

    def add(
        self, now: datetime, step: int, compute_s: float, data_s: float
    ) -> dict[str, float | int] | None:
        """Record one step; the summary of the period before when a new one began."""
        period = math.floor(now.timestamp() / self._every)
        line = None
        if self._compute and period != self._period:
            line = {
                "step": self._step,
                "steps": len(self._compute),
                "compute_s": round(median(self._compute), 4),
                "data_s": round(median(self._data), 4),
            }
            self._compute, self._data = [], []
        self._period = period
        self._compute.append(max(compute_s, 0.0))
        self._data.append(max(data_s, 0.0))
        self._step = step
        return line


def json_scores(by_rank: dict[int, float]) -> dict[str, float]:
    """NVRx scores as JSON keys (JSON objects have string keys): ``{"13": 0.71}``."""
    return {str(rank): round(score, 4) for rank, score in sorted(by_rank.items())}
