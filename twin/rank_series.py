"""A lockstep job's per-rank, per-minute step-time summaries, as the job's helper reports them
(``RankSample``): what the straggler detector reads, with the confounders it must not blame.

Each rank computes a base time per step with a lasting offset of its own (chips differ by a
percent or two) and minute-to-minute jitter. Over that, seeded: whole-job slow minutes (a
checkpoint write, a slow collective every rank waits on: every rank's compute time up), data
loader hiccups (every rank waits on input), one rank's noisy minute, one node's minute or two of
slow compute (a host hiccup, not a slow node), and input-skewed spells on one node (its ranks
wait on input a good part of a step; their compute is as normal, or up by ``skew_compute``).
A slow node (``twin.slow_nodes``) is laid over the healthy series by ``slowed``, so one series
serves every policy, each swapping the node out at its own minute."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from remedy.detection.stragglers.models import RankSample
from twin.slow_nodes import SlowFault

Minute = list[RankSample]  # every rank's sample for one minute


class SeriesShape(BaseModel):
    nodes: int = Field(default=64, ge=1)
    ranks_per_node: int = Field(default=8, ge=1)
    compute_s: float = Field(default=0.8, gt=0)  # per step, a healthy rank's median
    data_s: float = Field(default=0.01, ge=0)  # per step, waiting on input
    rank_spread: float = Field(default=0.015, ge=0)  # sd of each rank's lasting offset
    jitter: float = Field(default=0.01, ge=0)  # sd of a rank's minute-to-minute change
    # Chances per minute, each drawn on its own:
    job_slow: float = Field(default=0.03, ge=0, le=1)  # every rank's compute × 1.1-1.6
    loader_hiccup: float = Field(default=0.02, ge=0, le=1)  # every rank's input wait × 5-20
    noisy: float = Field(default=0.1, ge=0, le=1)  # one rank's compute × 1.3-3, one minute
    hiccup: float = Field(default=0.02, ge=0, le=1)  # a node's ranks × 1.2-2 for 1-2 minutes
    # A node's ranks wait on input 10-50 % of a step longer than the others, for 5-30 min.
    skew: float = Field(default=0.01, ge=0, le=1)
    skew_compute: float = Field(default=0.0, ge=0)  # a skewed node's compute up by this much


class Skew(BaseModel):
    node: int
    start: int  # minute
    end: int  # minute, exclusive


class Series(BaseModel):
    """The healthy series, minute by minute, and what was laid into it."""

    minutes: list[Minute]
    job_slow: list[int] = []  # minutes
    hiccups: list[int] = []
    noisy: list[tuple[int, int]] = []  # (minute, rank)
    node_hiccups: list[Skew] = []  # a node slow for a minute or two: a host hiccup, no fault
    skews: list[Skew] = []


def node_name(node: int) -> str:
    return f"node-{node:03d}"


def spare_name(node: int) -> str:
    """The spare that took ``node``'s place in the job."""
    return f"spare-for-{node:03d}"


def healthy_series(
    shape: SeriesShape, minutes: int, seed: int, start: datetime, job: str = "train"
) -> Series:
    rng = random.Random(seed)
    ranks = shape.nodes * shape.ranks_per_node
    base = [shape.compute_s * (1 + rng.gauss(0, shape.rank_spread)) for _ in range(ranks)]
    series = Series(minutes=[])
    steps = 0
    for minute in range(minutes):
        whole = 1 + rng.uniform(0.1, 0.6) if rng.random() < shape.job_slow else 1.0
        waits = rng.uniform(5, 20) if rng.random() < shape.loader_hiccup else 1.0
        series.job_slow += [minute] * (whole > 1)
        series.hiccups += [minute] * (waits > 1)
        noisy = rng.randrange(ranks) if rng.random() < shape.noisy else -1
        if noisy >= 0:
            series.noisy.append((minute, noisy))
        if rng.random() < shape.skew:
            node, length = rng.randrange(shape.nodes), rng.randint(5, 30)
            series.skews.append(Skew(node=node, start=minute, end=minute + length))
        if rng.random() < shape.hiccup:
            node, length = rng.randrange(shape.nodes), rng.randint(1, 2)
            series.node_hiccups.append(Skew(node=node, start=minute, end=minute + length))
        hiccups = {
            h.node: rng.uniform(1.2, 2.0) for h in series.node_hiccups if h.start <= minute < h.end
        }
        skewed = {s.node: s for s in series.skews if s.start <= minute < s.end}
        skew_wait = {node: rng.uniform(0.1, 0.5) * shape.compute_s for node in skewed}
        at = start + timedelta(minutes=minute)
        step_s = max(base) * whole + shape.data_s * waits  # the slowest rank sets the pace
        count = max(1, round(60 / step_s))
        samples = []
        for rank, own in enumerate(base):
            node, local = divmod(rank, shape.ranks_per_node)
            compute = own * whole * (1 + rng.gauss(0, shape.jitter))
            compute *= rng.uniform(1.3, 3.0) if rank == noisy else hiccups.get(node, 1.0)
            data = shape.data_s * waits + skew_wait.get(node, 0.0)
            compute *= 1 + shape.skew_compute if node in skewed else 1.0
            samples.append(
                RankSample(
                    node=node_name(node),
                    pod=f"{job}-{node:03d}",
                    rank=rank,
                    local_rank=local,
                    gpu=f"GPU-{node:03d}-{local}",
                    at=at,
                    step=steps,
                    steps=count,
                    compute_s=max(compute, 0.0),
                    data_s=data,
                )
            )
        steps += count
        series.minutes.append(samples)
    return series


def slowed(samples: Minute, fault: SlowFault | None, minute: int, swapped: int | None) -> Minute:
    """One minute of the healthy series with the slow node laid over it: its ranks (or its one
    GPU's rank) compute ``factor`` slower while the fault is slow; from ``swapped`` on a spare
    runs in its place at the healthy pace."""
    if fault is None:
        return samples
    name = node_name(fault.node)
    if swapped is not None and minute >= swapped:
        spare = spare_name(fault.node)
        return [s.model_copy(update={"node": spare}) if s.node == name else s for s in samples]
    if not fault.slow_at(minute):
        return samples
    return [
        s.model_copy(update={"compute_s": s.compute_s * (1 + fault.factor)})
        if s.node == name and fault.gpu in (None, s.local_rank)
        else s
        for s in samples
    ]
