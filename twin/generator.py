"""Fault events for the twin: each cause a Poisson process at its reference rate, scaled to the
fleet and the period; seeded, so one seed is one history."""

from __future__ import annotations

import random
from datetime import timedelta

from pydantic import BaseModel

from twin.causes import Cause, expected_count

FaultKind = tuple[str | None, bool]  # (simulated fault, transient): what a ladder is run for


class FaultEvent(BaseModel):
    at: timedelta  # since the start of the run
    node: int  # index into the fleet (job nodes first, then spares)
    cause: str
    fault: str | None  # the simulated fault that plays it; None: no node signal
    transient: bool = False  # gone by itself before the first re-probe
    interrupts_job: bool

    @property
    def kind(self) -> FaultKind:
        return self.fault, self.transient


def generate(causes: list[Cause], nodes: int, duration: timedelta, seed: int) -> list[FaultEvent]:
    """Events in time order. Inter-arrival times are exponential at each cause's rate for this
    fleet, so the count per cause is Poisson with mean ``expected_count``."""
    rng = random.Random(seed)
    events: list[FaultEvent] = []
    horizon = duration.total_seconds()
    for cause in causes:
        mean = expected_count(cause, nodes, duration)
        if mean <= 0:
            continue
        rate = mean / horizon  # events per second
        t = rng.expovariate(rate)
        while t < horizon:
            variant = rng.choices(cause.variants, weights=[v.share for v in cause.variants])[0]
            events.append(
                FaultEvent(
                    at=timedelta(seconds=t),
                    node=rng.randrange(nodes),
                    cause=cause.name,
                    fault=variant.fault,
                    transient=variant.transient,
                    interrupts_job=cause.interrupts_job,
                )
            )
            t += rng.expovariate(rate)
    return sorted(events, key=lambda e: (e.at, e.node, e.cause))
