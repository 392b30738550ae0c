"""What the straggler detector reads and says: one rank's step-time summary, the policy, and
the verdict per job. Wire models: a newer helper or controller may add fields."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import Field

from remedy.core.models import Frozen, Wire
from remedy.detection.check_terms import CheckTerms

STRAGGLERS = CheckTerms(
    "stragglers",
    "each rank's compute time per step, as the job's helper reports it, against the job's "
    "other ranks and the rank's own history",
)
SLOW_NODE = STRAGGLERS.reason(
    "SlowNode",
    "the ranks on this node computed persistently slower than the job's other ranks across "
    "the window (a suspicion: the ladder's first rung proves it)",
)


class RankSample(Frozen):
    """One rank's summary of the steps since its last one (the helper reports a line a minute).

    ``compute_s`` is the rank's own work per step (forward, backward, optimizer), without the
    time it waited in collectives: a lockstep job's step time is the same on every rank (the
    fast ones wait for the slow one), so only the time before the wait shows who is slow."""

    node: str
    pod: str
    rank: int = Field(ge=0)
    local_rank: int = Field(default=0, ge=0)
    gpu: str = ""  # the GPU's UUID when the helper knows it, else ""
    at: datetime
    step: int = 0
    steps: int = Field(default=1, ge=0)  # steps the summary covers
    compute_s: float = Field(ge=0)  # median compute time per step
    data_s: float = Field(default=0.0, ge=0)  # median wait for input per step


class NvrxScores(Frozen):
    """NVIDIA Resiliency Extension's straggler scores for one report (0–1, 1 = the best):
    relative to the best rank, and to the rank's own history."""

    at: datetime
    relative: dict[int, float] = {}
    individual: dict[int, float] = {}


class CollectiveTimeout(Frozen):
    """An NCCL timeout (the flight recorder's dump): the ranks that never joined it."""

    at: datetime
    collective: str = ""
    missing_ranks: list[int] = []


class StragglerPolicy(Frozen):
    bucket: timedelta = timedelta(minutes=1)  # the helper's reporting period
    window: timedelta = timedelta(minutes=5)  # a node is judged over this much of its history
    slow_below: float = Field(default=0.9, gt=0, lt=1)  # score under which a rank is slow
    persist: float = Field(default=0.6, gt=0, le=1)  # share of the window's buckets it is slow
    min_nodes: int = Field(default=3, ge=2)  # fewer nodes: no peers to compare with
    # A node waiting on input this much longer than its peers is the application's (skew).
    skew_above: float = Field(default=1.5, gt=1)
    # ... and longer by at least this share of the job's median compute per step: a few
    # milliseconds more of a tiny wait cost the job nothing (every rank waits for it).
    skew_floor: float = Field(default=0.05, ge=0)


class Cause(StrEnum):
    NODE = "node"  # the node computes slowly: a suspect
    APPLICATION = "application"  # its ranks wait for input: the job's, not the node's


class SlowRank(Frozen):
    rank: int
    pod: str
    gpu: str = ""
    local_rank: int = 0
    score: float  # median over the window: the job's median compute time / this rank's


class NodeSuspicion(Frozen):
    node: str
    cause: Cause
    score: float  # the node's slowest rank's score
    ranks: list[SlowRank] = []
    since: datetime  # the window judged
    until: datetime
    buckets: int = 0  # buckets in the window with samples of this node
    slow_buckets: int = 0  # of which slow
    evidence: str = ""  # one line: scores, window, ranks
    nvrx_relative: float | None = None  # its ranks' lowest NVRx relative score in the window


class StragglerReport(Wire):
    """One judgement of one job: the suspects, the application's slow nodes, and why nothing
    was judged where nothing could be (too few nodes, no samples)."""

    job: str
    at: datetime
    suspects: list[NodeSuspicion] = []  # cause NODE
    application: list[NodeSuspicion] = []  # cause APPLICATION: recorded, never blamed
    not_judged: str = ""  # e.g. "2 nodes report: fewer than 3"
    # Nodes whose ranks a collective in the window waited for in vain (an NCCL timeout): their
    # ranks. Evidence only: a timeout alone makes no suspect (a hang, not a straggler).
    missed: dict[str, list[int]] = {}
