"""The straggler detector: which nodes of a job compute persistently slower than its peers.

**Scores.** The samples (each rank's median compute time per step over about a minute, as the
job's helper reports it) fall into buckets of ``policy.bucket``, aligned to the clock (bucket
``k`` holds the samples reported in ``[k·bucket, (k+1)·bucket)``; the helper prints its line
just after each minute, so every rank's summary of one minute lands in the same bucket). In a
bucket each rank's score is the job's median compute time over the rank's own, capped at 1:
0.87 means the rank took 15 % longer than the job's typical rank in that same minute. The
reference is the bucket's median, never an absolute time or the window's: when the whole job
slows (a data loader, checkpoint writes, a slow collective every rank waits on) the median
moves with it and no score does. NVIDIA's Resiliency Extension scores the same way but against
the best rank ("relative") and the rank's own best ("individual")
(https://nvidia.github.io/nvidia-resiliency-ext/straggler_det/usage_guide.html, "Design
Overview": 0.5 means twice as slow as the fastest rank, or as its own best); the median is
used here because one lucky-fast rank would otherwise make every other rank look slow.

**A suspect.** A node's bucket is slow when its slowest rank scores under ``slow_below``; a node
is a suspect (``Cause.NODE``) when at least ``persist`` of the window's buckets it reported in
are slow, and at least as many as ``persist`` of a whole window (and never fewer than 2): one
noisy step moves a minute's median by nothing, one noisy minute is one bucket, and neither
blames a node. A bucket with fewer than ``min_nodes`` nodes has no peers and is not counted.

**History is evidence, not a filter.** The rank's score before the window (its median score
over the hour before: a score, not a time, so the whole job slowing since does not read as the
rank becoming slow) says whether it *became* slow or always was. It does not excuse a rank that
always was: from the job's samples alone a node slow from its first step (a bad GPU, a
throttled link) looks exactly like a rank with a heavier role, and the first is what this
detector is for. A rank that only logs more (rank 0) is not slower here, because compute time is
measured around the GPU's work (CUDA events around forward and backward), not the host's; a job
whose ranks do unequal GPU work by design is caught by the ladder's first rung, which proves a
suspect against its peers before anything disruptive and lets an unproven one expire.

**The application's.** A node whose ranks wait for input at least ``skew_above`` times the job's
median wait, and longer by ``skew_floor`` of the job's median compute time (every rank waits
for it: less costs the job little), while its compute is not slow, is the job's input
skew: ``Cause.APPLICATION``, recorded in ``report.application``, never a suspect.

**Other evidence.** NVRx scores of a node's ranks and the NCCL timeouts its ranks missed go into
the evidence line. Neither makes a suspect on its own: NVRx's reference is the best rank and
the sections the job chose to time; a collective that timed out is a hang (every rank but the
missing one waited), which the job's failure path handles, and the missing rank may itself be
waiting on another. Pure: the time comes in as ``now``.

>>> from datetime import UTC
>>> t0 = datetime(2026, 1, 1, tzinfo=UTC)
>>> def at(node, rank, minute, compute):
...     return RankSample(node=node, pod=node, rank=rank, at=t0 + timedelta(minutes=minute),
...                       compute_s=compute)
>>> samples = [at(f"n{r}", r, m, 0.5 if r == 2 else 0.4) for r in range(4) for m in range(1, 6)]
>>> report = judge(samples, t0 + timedelta(minutes=5), "ml/a")
>>> [(s.node, s.score, s.slow_buckets, s.buckets) for s in report.suspects]
[('n2', 0.8, 5, 5)]
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

from remedy.detection.stragglers.models import (
    Cause,
    CollectiveTimeout,
    NodeSuspicion,
    NvrxScores,
    RankSample,
    SlowRank,
    StragglerPolicy,
    StragglerReport,
)

Key = tuple[str, int]  # (node, rank): a rank moved by an elastic restart is another key
# A suspect's history is read over at most this much before the window: about what a pod's
# log tail holds (adapters/kubernetes/job_times.py), and bounded work for a large job.
HISTORY = timedelta(hours=1)


@dataclass(frozen=True)
class _Bucket:
    """One bucket's ranks: their scores, their input waits, and the job's medians."""

    scores: dict[Key, float]
    data: dict[Key, float]
    median_data: float
    typical: float  # the job's median compute time per step
    newest: dict[Key, RankSample]  # for pod, GPU and local rank


@dataclass
class _Node:
    buckets: int = 0
    slow: int = 0
    skewed: int = 0
    ranks: dict[int, list[float]] = field(default_factory=dict)  # rank: its scores
    waits: list[tuple[float, float]] = field(default_factory=list)  # (node's, job's median)
    newest: dict[int, RankSample] = field(default_factory=dict)


def _key(at: datetime, bucket: timedelta) -> int:
    return math.floor(at.timestamp() / bucket.total_seconds())


def _score(compute_s: float, typical: float) -> float:
    if compute_s <= 0 or typical <= 0:
        return 1.0  # nothing measured: no evidence either way
    return min(1.0, typical / compute_s)


def _buckets(samples: list[RankSample], policy: StragglerPolicy) -> dict[int, _Bucket]:
    """Every bucket with peers enough to compare (``min_nodes`` nodes), by its key."""
    grouped: dict[int, dict[Key, list[RankSample]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        grouped[_key(s.at, policy.bucket)][(s.node, s.rank)].append(s)
    out = {}
    for k, ranks in grouped.items():
        if len({node for node, _ in ranks}) < policy.min_nodes:
            continue
        # Two summaries of one rank in a bucket (a late line): their median.
        compute = {key: median(s.compute_s for s in got) for key, got in ranks.items()}
        data = {key: median(s.data_s for s in got) for key, got in ranks.items()}
        typical = median(compute.values())
        out[k] = _Bucket(
            scores={key: _score(c, typical) for key, c in compute.items()},
            data=data,
            median_data=median(data.values()),
            typical=typical,
            newest={key: max(got, key=lambda s: s.at) for key, got in ranks.items()},
        )
    return out


def _nodes(buckets: list[_Bucket], policy: StragglerPolicy) -> dict[str, _Node]:
    nodes: dict[str, _Node] = defaultdict(_Node)
    for b in buckets:
        by_node: dict[str, list[Key]] = defaultdict(list)
        for key in b.scores:
            by_node[key[0]].append(key)
        for name, keys in by_node.items():
            n = nodes[name]
            n.buckets += 1
            slowest = min(b.scores[k] for k in keys)
            wait = max(b.data[k] for k in keys)
            n.waits.append((wait, b.median_data))
            if slowest < policy.slow_below:
                n.slow += 1
            elif wait >= policy.skew_above * b.median_data and (
                wait - b.median_data >= policy.skew_floor * b.typical
            ):
                n.skewed += 1
            for k in keys:
                n.ranks.setdefault(k[1], []).append(b.scores[k])
                n.newest[k[1]] = b.newest[k]
    return nodes


def _needed(policy: StragglerPolicy) -> int:
    """Slow buckets a suspect needs at least: ``persist`` of a whole window, and 2."""
    whole = max(1, round(policy.window / policy.bucket))
    return max(2, math.ceil(policy.persist * whole - 1e-9))


def _persistent(count: int, n: _Node, policy: StragglerPolicy) -> bool:
    return count >= _needed(policy) and count >= policy.persist * n.buckets - 1e-9


def _slow_ranks(n: _Node, policy: StragglerPolicy) -> list[SlowRank]:
    """The node's ranks slow over the window, slowest first; at least its slowest."""
    scored = sorted((median(s), r) for r, s in n.ranks.items())
    slow = [(s, r) for s, r in scored if s < policy.slow_below] or scored[:1]
    return [
        SlowRank(
            rank=r,
            pod=n.newest[r].pod,
            gpu=n.newest[r].gpu,
            local_rank=n.newest[r].local_rank,
            score=round(s, 3),
        )
        for s, r in slow
    ]


def judge(
    samples: list[RankSample],
    now: datetime,
    job: str,
    policy: StragglerPolicy = StragglerPolicy(),  # noqa: B008 (frozen: one shared default)
    nvrx: list[NvrxScores] = [],  # noqa: B006 (never mutated)
    timeouts: list[CollectiveTimeout] = [],  # noqa: B006 (never mutated)
) -> StragglerReport:
    """One judgement of ``job`` over the window before ``now`` (module docstring)."""
    since = now - policy.window
    window = [s for s in samples if since < s.at <= now]
    reporting = {s.node for s in window}
    node_of = {s.rank: s.node for s in sorted(samples, key=lambda s: s.at)}
    missed = _missed(timeouts, node_of, since, now)
    report = StragglerReport(job=job, at=now, missed=missed)
    if not reporting:
        why = f"no rank reported in the last {_span(policy.window)}"
        return report.model_copy(update={"not_judged": why})
    if len(reporting) < policy.min_nodes:
        why = f"{len(reporting)} nodes report: fewer than {policy.min_nodes}"
        return report.model_copy(update={"not_judged": why})
    flagged = [
        (name, n, Cause.NODE if _persistent(n.slow, n, policy) else Cause.APPLICATION)
        for name, n in sorted(_nodes(list(_buckets(window, policy).values()), policy).items())
        if _persistent(n.slow, n, policy) or _persistent(n.skewed, n, policy)
    ]
    earlier = [s for s in samples if since - HISTORY < s.at <= since] if flagged else []
    before = _nodes(list(_buckets(earlier, policy).values()), policy)
    scores = _nvrx(nvrx, node_of, since, now)
    suspects: list[NodeSuspicion] = []
    application: list[NodeSuspicion] = []
    for name, n, cause in flagged:
        ranks = _slow_ranks(n, policy)
        found = NodeSuspicion(
            node=name,
            cause=cause,
            score=ranks[0].score,
            ranks=ranks,
            since=since,
            until=now,
            buckets=n.buckets,
            slow_buckets=n.slow if cause is Cause.NODE else n.skewed,
            nvrx_relative=scores.get(name),
        )
        line = _evidence(found, n, before.get(name), missed.get(name, []), policy)
        found = found.model_copy(update={"evidence": line})
        (suspects if cause is Cause.NODE else application).append(found)
    return report.model_copy(
        update={
            "suspects": sorted(suspects, key=lambda s: (s.score, s.node)),
            "application": application,
        }
    )


def _missed(
    timeouts: list[CollectiveTimeout], node_of: dict[int, str], since: datetime, now: datetime
) -> dict[str, list[int]]:
    """Each node's ranks that a collective in the window waited for in vain (a rank that never
    reported its step times has no known node: it is left out)."""
    missed: dict[str, set[int]] = defaultdict(set)
    for t in timeouts:
        if since < t.at <= now:
            for rank in t.missing_ranks:
                if rank in node_of:
                    missed[node_of[rank]].add(rank)
    return {node: sorted(ranks) for node, ranks in sorted(missed.items())}


def _nvrx(
    reports: list[NvrxScores], node_of: dict[int, str], since: datetime, now: datetime
) -> dict[str, float]:
    """Each node's lowest NVRx relative score in the window (its slowest rank's)."""
    lowest: dict[str, float] = {}
    for r in reports:
        if since < r.at <= now:
            for rank, score in r.relative.items():
                if rank in node_of:
                    node = node_of[rank]
                    lowest[node] = min(score, lowest.get(node, 1.0))
    return lowest


def _span(d: timedelta) -> str:
    minutes = d.total_seconds() / 60
    return f"{minutes:g} min" if minutes >= 1 else f"{d.total_seconds():g} s"


def _history(s: NodeSuspicion, before: _Node | None, policy: StragglerPolicy) -> str:
    """The slow ranks' score before the window: did the node become slow, or always was?"""
    earlier = [median(before.ranks[r.rank]) for r in s.ranks if before and r.rank in before.ranks]
    if not earlier:
        return "no history before the window"
    was = min(earlier)
    then = "became slow" if was >= policy.slow_below else "slow before too"
    return f"before the window {was:.2f} ({then})"


def _evidence(
    s: NodeSuspicion, n: _Node, before: _Node | None, missed: list[int], policy: StragglerPolicy
) -> str:
    """One line: the score, the window, the slow buckets, the ranks (rank→GPU), and history."""
    window = f"{s.since:%H:%M}–{s.until:%H:%M}"
    ranks = ", ".join(f"{r.rank}→{r.gpu or '?'} {r.score:.2f}" for r in s.ranks)
    if s.cause is Cause.NODE:
        head = (
            f"score {s.score:.2f} (the job's median compute per step over the rank's) in "
            f"{s.slow_buckets}/{s.buckets} buckets of {window}; ranks {ranks}"
        )
    else:
        wait, typical = median(w for w, _ in n.waits), median(t for _, t in n.waits)
        head = (
            f"input wait {wait:.3f} s against the job's median {typical:.3f} s in "
            f"{s.slow_buckets}/{s.buckets} buckets of {window}, compute score {s.score:.2f} "
            f"(not slow): the job's input skew, not the node; ranks {ranks}"
        )
    parts = [head, _history(s, before, policy)] if s.cause is Cause.NODE else [head]
    if s.nvrx_relative is not None:
        parts.append(f"NVRx relative {s.nvrx_relative:.2f}")
    if missed:
        parts.append(f"missed a collective that timed out (ranks {', '.join(map(str, missed))})")
    return "; ".join(parts)
