"""What the fleet scan measures of guarded jobs each pass (goodput per job and pool), where it
comes from (``ProgressSource``), and how a guard's end reads as a job's outcome. Pure."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from pydantic import BaseModel

from remedy.attribution.goodput import (
    JobEnd,
    JobGoodput,
    JobTimes,
    Outcome,
    PoolGoodput,
    goodput,
    pool_goodput,
    summarise,
)
from remedy.attribution.guard import GuardPolicy
from remedy.detection.stragglers.models import StragglerReport

SUCCEEDED_REASON = "the job succeeded"  # what the job watch tells a guard (JobState's value)
# A guard hears of its job's progress when it changed (a checkpoint, or goodput moved by
# PROGRESS_MOVE) but no sooner than PROGRESS_SOONEST after the last, and at least every
# PROGRESS_EVERY: each signal is four events in the guard's history, and the scan measures
# every 5 s in the demo. At most 12 signals (48 events) an hour, 4 for a steady job.
PROGRESS_EVERY = timedelta(minutes=15)
PROGRESS_SOONEST = timedelta(minutes=5)
PROGRESS_MOVE = 0.05


class ProgressSource(Protocol):
    """Each guarded job's pods with their reports, and each pool's GPUs."""

    def job_times(self) -> list[JobTimes]: ...

    def pool_gpus(self) -> dict[str, int]: ...


class GoodputWatch(BaseModel):
    """What the scan hands the measuring activity: how to start a guard for a job that has
    none yet (every running guarded job gets one, so jobs that never fail count too)."""

    policy: GuardPolicy = GuardPolicy()
    controller_task_queue: str
    node_task_queue: str = ""


class MeasuredJob(BaseModel):
    goodput: JobGoodput
    running: bool = False  # a pod of it runs now
    size: int = 0  # its pods running now
    since: datetime | None = None  # its newest pod's start


class JobsGoodput(BaseModel):
    """One scan's figures. Tolerates fields a newer controller adds."""

    jobs: list[MeasuredJob] = []
    pools: list[PoolGoodput] = []


def measure(times: list[JobTimes], pool_gpus: dict[str, int], now: datetime) -> JobsGoodput:
    """Goodput over each job's life as the cluster still shows it, and each pool's last day."""
    works = [summarise(t, now) for t in times]
    return JobsGoodput(
        jobs=[
            MeasuredJob(
                goodput=goodput(work, now),
                running=any(p.ended_at is None for p in t.pods),
                size=sum(1 for p in t.pods if p.ended_at is None),
                since=max((p.started_at for p in t.pods), default=None),
            )
            for t, work in zip(times, works, strict=True)
        ],
        pools=pool_goodput(works, pool_gpus, now),
    )


def progress_due(last: JobGoodput | None, now: JobGoodput, suspects_changed: bool = False) -> bool:
    """Whether the guard that holds ``last`` (None: nothing this controller handed it) should
    be handed ``now``. A straggler report whose suspects changed goes at once: the guard's
    proof of a slow node waits for no coalescing."""
    if last is None or suspects_changed:
        return True
    since = now.at - last.at
    if since >= PROGRESS_EVERY:
        return True
    moved = (
        now.checkpoint_step != last.checkpoint_step
        or (now.ratio is None) != (last.ratio is None)
        or abs((now.ratio or 0) - (last.ratio or 0)) >= PROGRESS_MOVE
    )
    return moved and since >= PROGRESS_SOONEST


def end_of(finished: bool, reason: str, cause: str) -> JobEnd:
    """A guard's end as the job's outcome: finished (the job succeeded, or was deleted while it
    ran: neither) or stopped, by remedy or a person, with the verdict that ended it."""
    if not finished:
        return JobEnd(outcome=Outcome.FAILED, cause=cause or "unknown")
    return JobEnd(outcome=Outcome.SUCCEEDED if reason == SUCCEEDED_REASON else Outcome.DELETED)


def goodput_line(g: JobGoodput) -> str:
    """The job's goodput as its guard's details show it."""
    return (
        f"goodput {percent(g.ratio)} of {g.paid_s / 3600:.1f} GPU-h"
        + (f" · step {g.step}" if g.step is not None else "")
        + (f" · checkpoint at step {g.checkpoint_step}" if g.checkpoint_step else "")
    )


def named(report: StragglerReport | None) -> tuple[str, ...]:
    """The nodes a straggler report names (suspects, then the application's): what a guard is
    handed again at once when it changes."""
    if report is None:
        return ()
    return (
        *sorted(s.node for s in report.suspects),
        "|",
        *sorted(a.node for a in report.application),
    )


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f} %"
