"""The job side's seams: how guarded jobs are found failing, restarted and stopped.
Adapters: Kubernetes Jobs (``adapters/kubernetes/jobs.py``) and the simulation's."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Protocol

from remedy.attribution.elastic import JobShape
from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.guard import JobRef
from remedy.attribution.job_report import ProgressSource


class JobState(StrEnum):
    RUNNING = "running"
    SUSPENDED = "suspended"
    FAILED = "failed"
    SUCCEEDED = "succeeded"
    GONE = "gone"  # deleted

    @property
    def finished(self) -> bool:
        """Nothing left to guard: the job completed, or someone deleted it."""
        return self in (JobState.SUCCEEDED, JobState.GONE)


class JobControl(Protocol):
    """What a guard does to its job, by the job's own mechanism."""

    def restart_job(
        self,
        job: JobRef,
        attempt: int,
        reason: str,
        resumed_by: str | None = None,
        *,
        size: int | None = None,
        grow: bool = False,
    ) -> str:
        """Make the job run again from its last checkpoint. Idempotent per ``attempt``: a
        retried activity must not restart twice. A job remedy stopped runs again only when a
        person resumed it (``resumed_by``); otherwise ActionRefused. ``size``: an elastic
        job's new size; ``grow``: the job still runs (it checkpointed) and is ended first."""

    def job_shape(self, job: JobRef) -> JobShape:
        """The job's declared size range, its size, and how many of its pods fit now."""

    def checkpoint_job(self, job: JobRef, asked_at: datetime) -> bool:
        """Ask the job's running pods to checkpoint; whether all of them acknowledged."""

    def stop_job(self, job: JobRef, reason: str) -> str:
        """Keep the job from running again until a human decides (a restart undoes it)."""


class GuardedJobs(ProgressSource, Protocol):
    """Where guarded jobs' failures, and their pods' times and reports, come from."""

    def failed_pods(self) -> list[GuardedFailure]:
        """Failed pods of guarded jobs not yet handed to their guard."""

    def mark_reported(self, failure: GuardedFailure, guard: str) -> None:
        """The guard has the failure: never list it again."""

    def job_state(self, job: JobRef) -> JobState: ...


class JobSide(JobControl, GuardedJobs, Protocol):
    """Both: what the controller needs of a cluster's jobs."""
