"""Slowness on the fleet twin's job: the slow faults of its nodes over its days, at the assumed
rate (``twin.generator`` with ``SLOW_NODES``), each drawn from the slow-node population, and
each leaving the job when a policy's detector (as measured on the episodes) had it swapped out.

The job runs at its slowest node's pace, so two slow nodes at once cost the slower one's
f/(1 + f), not the sum. A fault's outcome under a policy is borrowed from an episode of the same
band of slowdown (``BANDS``): a random one of them, seeded, says whether it was swapped and how
many minutes after its onset; a fault the episodes never met in its band stays until ``life``."""

from __future__ import annotations

import random
from datetime import timedelta

from pydantic import BaseModel

from twin.generator import generate
from twin.slow_episodes import Played
from twin.slow_figures import BANDS
from twin.slow_nodes import SLOW_NODES, SlowFault, draw
from twin.slowness import NODE_BACK, SWAP_CHECKPOINT, SWAP_RESTART, life

DAY = 24 * 60


class FleetSlowness(BaseModel):
    policy: str
    nodes: int
    days: float
    faults: int
    swapped: int
    lost_min: float  # whole-job minutes
    lost_share: float  # of the job's time


def fleet_faults(nodes: int, days: float, seed: int, gpus: int = 8) -> list[SlowFault]:
    events = generate([SLOW_NODES], nodes, timedelta(days=days), seed)
    rng = random.Random(seed)
    return [draw(rng, e.node, int(e.at / timedelta(minutes=1)), gpus) for e in events]


def _band(factor: float) -> int:
    return next((i for i, (_, high) in enumerate(BANDS) if factor < high), len(BANDS) - 1)


def outcomes(played: list[Played]) -> dict[int, list[int | None]]:
    """Per band, each episode's minutes from onset to the swap (None: not swapped)."""
    out: dict[int, list[int | None]] = {}
    for p in played:
        if p.fault is not None:
            after = None if p.swapped is None else p.swapped - p.fault.onset
            out.setdefault(_band(p.fault.factor), []).append(after)
    return out


def fleet_slowness(
    faults: list[SlowFault],
    played: list[Played],
    nodes: int,
    days: float,
    seed: int,
    spare: bool = True,
) -> FleetSlowness:
    """The job's minutes lost to its slow nodes under the policy ``played`` was played with
    (detection off: no swap but by hand, at ``life``)."""
    rng = random.Random(seed)
    by_band = outcomes(played)
    horizon = int(days * DAY)
    pace = [0.0] * horizon  # each minute's slowest slowdown factor
    swaps = swapped = 0
    for fault in faults:
        drawn = by_band.get(_band(fault.factor)) or [None]
        after = rng.choice(drawn)
        end = life(fault)
        leaves = end if after is None else min(fault.onset + after, end)
        by_hand = fault.lasts is None or fault.lasts > leaves - fault.onset
        swaps += leaves < horizon and (after is not None and leaves < end or by_hand)
        swapped += after is not None and fault.onset + after < end
        for minute in range(fault.onset, min(leaves, horizon)):
            if fault.slow_at(minute):
                pace[minute] = max(pace[minute], fault.factor)
    per_swap = SWAP_CHECKPOINT + SWAP_RESTART + (0.0 if spare else NODE_BACK / nodes)
    lost = sum(f / (1 + f) for f in pace if f) + swaps * per_swap
    return FleetSlowness(
        policy=played[0].policy if played else "",
        nodes=nodes,
        days=days,
        faults=len(faults),
        swapped=swapped,
        lost_min=lost,
        lost_share=lost / horizon,
    )
