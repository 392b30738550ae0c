"""Goodput and job success, from what remedy sees of guarded jobs (docs/jobs.md#goodput).

**Goodput**: the share of paid GPU-time that became kept training progress. A pod of a guarded
job is productive from the moment it works (its first ``resumed`` report, else its start) to
the last checkpoint that kept its work (its end when it succeeded), less the time it spent
writing checkpoints. Work after the last checkpoint of a pod that failed is lost; a running
pod's work since its last checkpoint is at risk and not counted yet. A job's goodput is over
its own GPU-time; a pool's is over the pool's GPUs for the whole window.

**Job success**: guarded jobs that succeeded over those that ended, succeeded or failed (a job
someone deleted while it ran did neither); a failure's cause is the verdict of the failure that
ended it. Pure: the time comes in as an argument."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The line a job's helper prints (remedy_job/progress.py spells it too: it imports nothing of
# remedy). The controller reads pods' logs already, so reporting needs no right of the job.
PROGRESS_PREFIX = "remedy.io/progress "
WINDOW = timedelta(hours=24)  # a pool's goodput is over the last day


class Event(StrEnum):
    RESUMED = "resumed"  # the loop works, from this step (a checkpoint restored)
    STEP = "step"
    CHECKPOINT = "checkpoint"  # written and durable: the work up to it is kept
    ACKNOWLEDGED = "acknowledged"  # remedy's checkpoint request answered (after a checkpoint)
    # What the straggler detector reads (remedy/scan/job_symptoms.py), never goodput:
    RANK = "rank"  # one rank's median step times since its last line (remedy_job/ranks.py)
    NVRX = "nvrx"  # NVIDIA Resiliency Extension's straggler scores, per rank
    NCCL_TIMEOUT = "nccl_timeout"  # a collective timed out: the ranks that never joined it


# The training loop's own events, which goodput counts; a line of any other is skipped here.
LOOP = frozenset({Event.RESUMED, Event.STEP, Event.CHECKPOINT, Event.ACKNOWLEDGED})


class Progress(BaseModel):
    """One report of a job's training loop. Tolerates fields a newer helper adds; a line whose
    event this controller does not know is skipped (``parse``), so a newer helper's events
    cost an older controller nothing."""

    model_config = ConfigDict(frozen=True)

    event: Event
    at: datetime
    step: int = 0
    seconds: float = 0.0  # a checkpoint: time spent writing it
    request: str = ""  # acknowledged: the request (its annotation's value) answered
    # rank: whose step times, over how many steps, their medians (compute without the
    # collectives' wait; the wait for input)
    rank: int | None = Field(default=None, ge=0)
    local_rank: int = Field(default=0, ge=0)
    gpu: str = ""
    steps: int = Field(default=0, ge=0)
    compute_s: float = Field(default=0.0, ge=0)
    data_s: float = Field(default=0.0, ge=0)
    # nvrx: each rank's scores (0–1), relative to the best rank and to its own best
    relative: dict[int, float] = {}
    individual: dict[int, float] = {}
    # nccl_timeout: the collective, and the ranks it waited for in vain
    collective: str = ""
    missing_ranks: list[int] = []


def parse(log: str) -> list[Progress]:
    """The helper's reports in a log, oldest first; any other line, or a broken one, skipped."""
    found = []
    for line in log.splitlines():
        head, sep, body = line.partition(PROGRESS_PREFIX)
        if not sep or head.strip():
            continue
        try:
            found.append(Progress.model_validate(json.loads(body)))
        except (ValueError, ValidationError):
            continue
    return sorted(found, key=lambda p: p.at)


class PodTime(BaseModel):
    """A pod of a guarded job as the cluster shows it, with its own reports."""

    pod: str
    node: str = ""
    gpus: int = 1
    started_at: datetime
    ended_at: datetime | None = None  # None: still running
    succeeded: bool = False
    progress: list[Progress] = []


class JobTimes(BaseModel):
    job: str  # namespace/name
    pool: str = ""
    pods: list[PodTime] = []


class PodWork(BaseModel):
    """One pod's share in a job, summed up: small enough for a guard to keep for every pod of
    the job's life (the cluster forgets deleted pods and rotates logs)."""

    pod: str
    gpus: int
    started_at: datetime
    ended_at: datetime | None = None
    productive_from: datetime  # its first ``resumed``, else its start
    kept_until: datetime  # its last checkpoint (its end when it succeeded)
    writing_s: float = 0.0  # checkpoint writes between the two
    step: int | None = None
    checkpoint_step: int | None = None
    checkpoint_at: datetime | None = None


class JobWork(BaseModel):
    job: str
    pool: str = ""
    pods: list[PodWork] = []

    def merge(self, newer: JobWork) -> JobWork:
        """What a later look adds: pods seen again replaced, pods gone since kept."""
        pods = {p.pod: p for p in [*self.pods, *newer.pods]}
        return JobWork(job=self.job, pool=newer.pool or self.pool, pods=list(pods.values()))


def summarise(times: JobTimes, now: datetime) -> JobWork:
    """Each pod's work from the job's reports (rank 0 may report for all: they move together).

    >>> t0 = datetime(2026, 1, 1)
    >>> at = lambda m: t0 + timedelta(minutes=m)
    >>> reports = [Progress(event=Event.CHECKPOINT, at=at(30), step=300, seconds=60)]
    >>> failed = PodTime(pod="p", gpus=8, started_at=t0, ended_at=at(45), progress=reports)
    >>> g = goodput(summarise(JobTimes(job="ml/a", pods=[failed]), at(60)), now=at(60))
    >>> (g.productive_s / 8 / 60, g.paid_s / 8 / 60)  # kept 29 of 45 min (1 min writing)
    (29.0, 45.0)
    """
    own_events = (p for pod in times.pods for p in pod.progress if p.event in LOOP)
    reports = sorted(own_events, key=lambda p: p.at)
    pods = []
    for pod in times.pods:
        end = pod.ended_at or now
        own = [p for p in reports if pod.started_at <= p.at <= end]
        resumed = [p.at for p in own if p.event is Event.RESUMED]
        start = resumed[0] if resumed else pod.started_at
        kept = [p for p in own if p.event is Event.CHECKPOINT]
        until = end if pod.succeeded else max((p.at for p in kept), default=start)
        steps = [p.step for p in own if p.event is not Event.ACKNOWLEDGED]
        pods.append(
            PodWork(
                pod=pod.pod,
                gpus=pod.gpus,
                started_at=pod.started_at,
                ended_at=pod.ended_at,
                productive_from=start,
                kept_until=max(until, start),
                writing_s=sum(p.seconds for p in kept if start <= p.at <= until),
                step=steps[-1] if steps else None,
                checkpoint_step=kept[-1].step if kept else None,
                checkpoint_at=kept[-1].at if kept else None,
            )
        )
    return JobWork(job=times.job, pool=times.pool, pods=pods)


class JobGoodput(BaseModel):
    """A job's figures at ``at``; GPU-seconds."""

    job: str
    pool: str = ""
    at: datetime
    productive_s: float = 0.0
    paid_s: float = 0.0
    step: int | None = None  # the last step reported
    checkpoint_step: int | None = None  # the last checkpoint written
    checkpoint_at: datetime | None = None

    @property
    def ratio(self) -> float | None:
        return self.productive_s / self.paid_s if self.paid_s > 0 else None


def _overlap(a: datetime, b: datetime, since: datetime, until: datetime) -> float:
    return max((min(b, until) - max(a, since)).total_seconds(), 0.0)


def goodput(work: JobWork, now: datetime, since: datetime | None = None) -> JobGoodput:
    """A job's productive and paid GPU-seconds, from ``since`` (a pool's window) to ``now``.
    Checkpoint writes are taken off in proportion to the part of the span in the window."""
    since = since or datetime.min.replace(tzinfo=now.tzinfo)
    productive = paid = 0.0
    for pod in work.pods:
        span = (pod.kept_until - pod.productive_from).total_seconds()
        inside = _overlap(pod.productive_from, pod.kept_until, since, now)
        writing = pod.writing_s * inside / span if span > 0 else 0.0
        productive += pod.gpus * max(inside - writing, 0.0)
        paid += pod.gpus * _overlap(pod.started_at, pod.ended_at or now, since, now)
    last = max(work.pods, key=lambda p: p.started_at, default=None)
    saved = [p for p in work.pods if p.checkpoint_at is not None]
    newest = max(saved, key=lambda p: p.checkpoint_at or now, default=None)
    return JobGoodput(
        job=work.job,
        pool=work.pool,
        at=now,
        productive_s=productive,
        paid_s=paid,
        step=last.step if last else None,
        checkpoint_step=newest.checkpoint_step if newest else None,
        checkpoint_at=newest.checkpoint_at if newest else None,
    )


class PoolGoodput(BaseModel):
    pool: str
    productive_s: float
    paid_s: float  # the pool's GPUs for the whole window

    @property
    def ratio(self) -> float | None:
        return self.productive_s / self.paid_s if self.paid_s > 0 else None


def pool_goodput(
    jobs: list[JobWork], pool_gpus: dict[str, int], now: datetime, window: timedelta = WINDOW
) -> list[PoolGoodput]:
    """Each pool's productive GPU-seconds of guarded jobs in the last ``window`` over what its
    GPUs cost in it: idle GPUs, broken nodes and unguarded work count as not productive.

    >>> t0 = datetime(2026, 1, 1)
    >>> pod = PodTime(pod="p", gpus=8, started_at=t0, succeeded=True,
    ...               ended_at=t0 + timedelta(hours=12))
    >>> now = t0 + timedelta(hours=24)
    >>> work = summarise(JobTimes(job="ml/a", pool="a", pods=[pod]), now)
    >>> [p.ratio for p in pool_goodput([work], {"a": 16}, now)]
    [0.25]
    """
    since = now - window
    productive: dict[str, float] = dict.fromkeys(pool_gpus, 0.0)
    for work in jobs:
        if work.pool in productive:
            productive[work.pool] += goodput(work, now, since).productive_s
    return [
        PoolGoodput(pool=pool, productive_s=productive[pool], paid_s=gpus * window.total_seconds())
        for pool, gpus in sorted(pool_gpus.items())
    ]


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # stopped by remedy or a person, or deleted while held
    DELETED = "deleted"  # deleted while it ran: neither


class JobEnd(BaseModel):
    """How a guarded job ended, and why (the verdict of the failure that ended it: platform,
    application, unknown; "" when it did not fail)."""

    outcome: Outcome
    cause: str = ""


def success_rate(ends: Iterable[JobEnd]) -> float | None:
    """Succeeded over succeeded and failed.

    >>> ok, bad = JobEnd(outcome=Outcome.SUCCEEDED), JobEnd(outcome=Outcome.FAILED, cause="x")
    >>> success_rate([ok] * 199 + [bad, JobEnd(outcome=Outcome.DELETED)])
    0.995
    """
    counted = [e.outcome for e in ends if e.outcome is not Outcome.DELETED]
    return counted.count(Outcome.SUCCEEDED) / len(counted) if counted else None
