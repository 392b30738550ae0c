"""Guarded jobs in the simulation: restarts and stops are recorded, failures are whatever a test
or the twin puts there, and no restart fails unless told to."""

from __future__ import annotations

import threading

from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.guard import JobRef
from remedy.attribution.jobs import JobState
from remedy.errors import ActionFailed, ActionRefused, PermissionDenied


class SimJobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.restarts: list[tuple[str, str]] = []  # (namespace/name, reason)
        self.stops: list[tuple[str, str]] = []
        self.broken: set[str] = set()  # jobs whose restart fails
        self.forbidden = False  # listing failures is refused (a missing RBAC rule)
        self.states: dict[str, JobState] = {}  # by namespace/name; absent: running
        self.failures: list[GuardedFailure] = []  # failed pods not yet reported
        self.reported: dict[str, str] = {}  # pod uid → the guard that has it
        self._attempts: set[tuple[str, int]] = set()

    def restart_job(self, job: JobRef, attempt: int, reason: str,
                    resumed_by: str | None = None) -> str:
        key = str(job)
        with self._lock:
            if key in self.broken:
                raise ActionFailed(f"job {key} could not be restarted")
            if self.states.get(key) is JobState.SUSPENDED and resumed_by is None:
                raise ActionRefused(f"job {key} was stopped by remedy: a person resumes it")
            if (key, attempt) not in self._attempts:  # a retried activity restarts once
                self._attempts.add((key, attempt))
                self.restarts.append((key, reason))
            self.states[key] = JobState.RUNNING
            return f"{key} restarted ({attempt})"

    def stop_job(self, job: JobRef, reason: str) -> str:
        with self._lock:
            self.stops.append((str(job), reason))
            self.states[str(job)] = JobState.SUSPENDED
            return f"{job} suspended"

    def failed_pods(self) -> list[GuardedFailure]:
        if self.forbidden:
            raise PermissionDenied("forbidden: remedy needs RBAC 'list' on pods")
        with self._lock:
            return [f for f in self.failures if f.pod_uid not in self.reported]

    def mark_reported(self, failure: GuardedFailure, guard: str) -> None:
        with self._lock:
            self.reported[failure.pod_uid] = guard

    def job_state(self, job: JobRef) -> JobState:
        with self._lock:
            return self.states.get(str(job), JobState.RUNNING)
