"""What the fleet scan measures of guarded jobs each pass (goodput per job and pool), where it
comes from (``ProgressSource``), and how a guard's end reads as a job's outcome. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from remedy.attribution.guard import GuardPolicy
from remedy.goodput import (
    JobEnd,
    JobGoodput,
    JobTimes,
    Outcome,
    PoolGoodput,
    goodput,
    pool_goodput,
    summarise,
)

SUCCEEDED_REASON = "the job succeeded"  # what the job watch tells a guard (JobState's value)


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


def end_of(finished: bool, reason: str, cause: str) -> JobEnd:
    """A guard's end as the job's outcome: finished (the job succeeded, or was deleted while it
    ran: neither) or stopped, by remedy or a person, with the verdict that ended it."""
    if not finished:
        return JobEnd(outcome=Outcome.FAILED, cause=cause or "unknown")
    return JobEnd(outcome=Outcome.SUCCEEDED if reason == SUCCEEDED_REASON else Outcome.DELETED)


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f} %"
