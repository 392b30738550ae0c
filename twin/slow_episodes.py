"""Episodes of one lockstep job with (or without) one slow node, judged every minute by the
straggler detector under a policy, as the job's guard would: who it named and when, when the
proof confirmed the culprit and the swap took it out, and what the slowness cost.

One healthy series per episode (``twin.rank_series``) serves every policy: the slow node is
laid over it minute by minute until that policy's swap, so each policy meets the same job."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from remedy.detection.stragglers.models import (
    CollectiveTimeout,
    NvrxScores,
    RankSample,
    StragglerPolicy,
    StragglerReport,
)
from twin.rank_series import Minute, Series, SeriesShape, healthy_series, node_name, slowed
from twin.slow_nodes import SlowFault, draw
from twin.slowness import PROVE, Cost, cost, proves

Detector = Callable[
    [list[RankSample], datetime, str, StragglerPolicy, list[NvrxScores], list[CollectiveTimeout]],
    StragglerReport,
]
JOB = "train"
WARMUP = 10  # minutes of history before a fault may start: the window fills, history begins
OBSERVE = 20  # minutes at least after a fault's onset before the episode ends


class EpisodeConfig(BaseModel):
    shape: SeriesShape = SeriesShape()
    minutes: int = Field(default=45, ge=WARMUP + OBSERVE + 1)  # each episode's length
    # Share of episodes with a slow fault; the rest measure false suspects only.
    with_fault: float = Field(default=0.8, ge=0, le=1)
    start: datetime = datetime(2026, 1, 5)


class Episode(BaseModel):
    seed: int
    fault: SlowFault | None
    series: Series


class Naming(BaseModel):
    """A node that became a suspect (it was not one the minute before)."""

    minute: int
    node: str
    true: bool  # the slow node, slow within the window
    top: bool  # the report's first suspect (its slowest)


class Played(BaseModel):
    """One episode under one policy."""

    policy: str
    seed: int
    minutes: int
    fault: SlowFault | None
    namings: list[Naming] = []
    found: int | None = None  # minute the slow node was first a suspect
    swapped: int | None = None  # minute it left the job, proven
    proofs: int = 0  # proofs started on the slow node
    cost: Cost | None = None  # of the slow fault, whole-job minutes
    skews: int = 0  # input-skewed spells in the episode
    skews_blamed: int = 0  # of which the skewed node was named a suspect during the spell
    skews_called_application: int = 0  # of which the detector said: the application's

    @property
    def time_to_culprit(self) -> int | None:
        return None if self.found is None or self.fault is None else self.found - self.fault.onset


def episodes(config: EpisodeConfig, count: int, seed: int) -> list[Episode]:
    """``count`` episodes, seeded: the same for every policy."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        own = seed * 1_000_003 + index
        fault = None
        if rng.random() < config.with_fault:
            onset = rng.randrange(WARMUP, config.minutes - OBSERVE)
            node = rng.randrange(config.shape.nodes)
            fault = draw(rng, node, onset, config.shape.ranks_per_node)
        series = healthy_series(config.shape, config.minutes, own, config.start, JOB)
        out.append(Episode(seed=own, fault=fault, series=series))
    return out


def play(
    episode: Episode,
    name: str,
    policy: StragglerPolicy | None,
    detector: Detector,
    config: EpisodeConfig,
    nodes: int,
) -> Played:
    """Judge every minute (``policy`` None: detection off); prove and swap the slow node when
    named; cost the fault by when it left."""
    fault, series = episode.fault, episode.series
    played = Played(
        policy=name, seed=episode.seed, minutes=config.minutes, fault=fault, skews=len(series.skews)
    )
    if policy is not None:
        _judge_each_minute(played, series, policy, detector, config)
    if fault is not None:
        played.cost = cost(fault, played.swapped, nodes)
    return played


def _judge_each_minute(
    played: Played,
    series: Series,
    policy: StragglerPolicy,
    detector: Detector,
    config: EpisodeConfig,
) -> None:
    fault = played.fault
    culprit = node_name(fault.node) if fault else None
    width = max(1, round(policy.window / policy.bucket))
    kept: list[Minute] = []
    before: set[str] = set()
    blamed: set[int] = set()
    application: set[int] = set()
    proving_until = -1
    for minute in range(config.minutes):
        kept.append(slowed(series.minutes[minute], fault, minute, played.swapped))
        window = [s for samples in kept[-width:] for s in samples]
        now = config.start + timedelta(minutes=minute)
        report = detector(window, now, JOB, policy, [], [])
        ranked = sorted(report.suspects, key=lambda s: s.score)
        named = {s.node for s in ranked}
        for suspect in ranked:
            if suspect.node not in before:
                true = suspect.node == culprit and _slow_within(fault, minute, width)
                top = suspect is ranked[0]
                played.namings.append(Naming(minute=minute, node=suspect.node, true=true, top=top))
        before = named
        _skews(series, minute, named, {s.node for s in report.application}, blamed, application)
        if fault is None or culprit not in named or played.swapped is not None:
            continue
        if played.found is None:
            played.found = minute
        if minute >= proving_until:  # a new suspicion: the guard proves it
            played.proofs += 1
            proving_until = minute + PROVE
            if proves(fault, minute):
                played.swapped = minute + PROVE
    played.skews_blamed = len(blamed)
    played.skews_called_application = len(application)


def _slow_within(fault: SlowFault | None, minute: int, width: int) -> bool:
    return fault is not None and fault.slow_minutes(minute - width + 1, minute + 1) > 0


def _skews(
    series: Series,
    minute: int,
    suspects: set[str],
    application: set[str],
    blamed: set[int],
    called: set[int],
) -> None:
    """Which input-skewed spells (by index) the detector blamed on the node, or called the
    application's, while they lasted (or within a window after: its evidence)."""
    for index, skew in enumerate(series.skews):
        if skew.start <= minute < skew.end + 5:
            name = node_name(skew.node)
            if name in suspects:
                blamed.add(index)
            if name in application:
                called.add(index)


def play_all(
    eps: Sequence[Episode],
    policies: Sequence[tuple[str, StragglerPolicy | None]],
    detector: Detector,
    config: EpisodeConfig,
) -> dict[str, list[Played]]:
    nodes = config.shape.nodes
    return {
        name: [play(e, name, policy, detector, config, nodes) for e in eps]
        for name, policy in policies
    }
