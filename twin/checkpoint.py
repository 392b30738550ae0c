"""The checkpoint interval that loses least for a failure rate (Young 1974, Daly 2006).

Writing a checkpoint costs C every interval τ; a failure, on average every M (the MTBF),
loses half an interval of work and a restart R. The lost fraction is about
C/τ + τ/(2M) + R/M, least at τ = √(2·C·M). Worked example: C = 30 s and M = 3 h (the Llama 3
job's 419 interruptions in 54 days) give τ = √(2 · 0.5 min · 180 min) ≈ 13.4 min."""

from __future__ import annotations

import math
from datetime import timedelta


def young_daly(cost: timedelta, mtbf: timedelta) -> timedelta:
    """τ = √(2·C·M); Daly's refinement subtracts C, a second-order term left out here."""
    return timedelta(seconds=math.sqrt(2 * cost.total_seconds() * mtbf.total_seconds()))


def lost_fraction(
    interval: timedelta, cost: timedelta, mtbf: timedelta, restart: timedelta
) -> float:
    """The first-order share of time lost to checkpoints, rework and restarts."""
    return cost / interval + interval / (2 * mtbf) + restart / mtbf
