"""Slow nodes: faults that make a node (or one of its GPUs) compute slower, with no Xid, no failed
check and no degraded link, so nothing but the job's own step times shows them.

No public table gives a rate per node-day the way Llama 3's does for interruptions; Greyhound
(Wu et al., USENIX ATC '25, a production cluster of 10,000+ GPUs) reports fail-slows "lasting
from sub-minutes to nearly ten hours" from contention, device degradation and congestion. The
shares below are this model's assumptions, named so a run can change them; the rate is a share
of the Llama 3 fault rate. Seeded: one seed, one population of slow faults."""

from __future__ import annotations

import math
import random
from datetime import timedelta

from pydantic import BaseModel, Field

from twin.causes import Cause, Variant

# Slow-node events for every 4 Llama 3 interruptions (419 in 54 days on 2,048 nodes): an
# assumption (no public rate; Greyhound calls fail-slows common). Played by no simulated fault.
SLOW_NODES = Cause(
    name="slow node",
    count=105,
    variants=[Variant(fault=None, share=1.0)],
    interrupts_job=False,
    note="a node computes 5-50 % slower with no other signal; the job slows, never stops",
)
SLOWEST, FASTEST = 0.05, 0.50  # the slowdown factor, uniform between: the range
INTERMITTENT = 0.3  # share of slow faults that come and go (thermal, contention)
SLOW_SPELL_MIN, FAST_SPELL_MIN = 8.0, 8.0  # intermittent: mean minutes slow, then normal
ONE_GPU = 0.4  # share that slow one GPU (one rank) rather than the whole node (host, PCIe)
PERSISTENT = 0.5  # share that stay until the node is taken out (degraded hardware)
# The rest pass by themselves after a log-uniform time in this range (Greyhound's range,
# from a few minutes rather than sub-minutes: shorter ones cost next to nothing).
PASSING_SHORTEST, PASSING_LONGEST = timedelta(minutes=3), timedelta(hours=10)


class SlowFault(BaseModel):
    """One slow node on the job, on a clock of whole minutes since the job's start."""

    node: int
    gpu: int | None = None  # the one slow local rank; None: every rank of the node
    onset: int = Field(ge=0)  # minute
    factor: float = Field(gt=0)  # its ranks take (1 + factor) times as long per step
    lasts: int | None = Field(default=None, ge=1)  # minutes; None: until taken out
    # Intermittent: the minutes since onset it is slow, as [start, end) spans; empty: always.
    spans: list[tuple[int, int]] = []

    @property
    def intermittent(self) -> bool:
        return bool(self.spans)

    def ends(self, horizon: int) -> int:
        """The minute it is gone by itself, or ``horizon``, whichever is first."""
        return horizon if self.lasts is None else min(self.onset + self.lasts, horizon)

    def slow_at(self, minute: int) -> bool:
        since = minute - self.onset
        if since < 0 or (self.lasts is not None and since >= self.lasts):
            return False
        return not self.spans or any(a <= since < b for a, b in self.spans)

    def slow_minutes(self, start: int, end: int) -> int:
        """Minutes slow in [start, end)."""
        return sum(self.slow_at(m) for m in range(max(start, self.onset), end))


def _spans(rng: random.Random, length: int) -> list[tuple[int, int]]:
    """Alternating slow and normal spells (exponential lengths, at least a minute each) over
    ``length`` minutes, slow first: the fault is seen when it starts."""
    spans, t = [], 0
    while t < length:
        slow = max(1, round(rng.expovariate(1 / SLOW_SPELL_MIN)))
        spans.append((t, min(t + slow, length)))
        t += slow + max(1, round(rng.expovariate(1 / FAST_SPELL_MIN)))
    return spans


def draw(rng: random.Random, node: int, onset: int, gpus: int, cap: int = 24 * 60) -> SlowFault:
    """One slow fault at ``onset`` on ``node``; an intermittent one's spells are drawn up to its
    end or ``cap`` minutes (a day) for one that stays."""
    persistent = rng.random() < PERSISTENT
    low, high = (
        math.log(PASSING_SHORTEST / timedelta(minutes=1)),
        math.log(PASSING_LONGEST / timedelta(minutes=1)),
    )
    lasts = None if persistent else max(1, round(math.exp(rng.uniform(low, high))))
    factor = rng.uniform(SLOWEST, FASTEST)
    gpu = rng.randrange(gpus) if rng.random() < ONE_GPU else None
    spans = _spans(rng, lasts or cap) if rng.random() < INTERMITTENT else []
    return SlowFault(node=node, gpu=gpu, onset=onset, factor=factor, lasts=lasts, spans=spans)
