"""Guarded Kubernetes Jobs on the official client: their failed pods (read by
``job_failures.py``), and restarting or stopping a job by the Job's own mechanism.

A job opts in with the label ``remedy.io/guard: "true"`` on the Job and its pod template.
Restart, by the Job's ``remedy.io/restart`` annotation:

- ``recreate`` (default): a failed Job is left as it is for the post-mortem and a copy named
  ``<job>-r<attempt>`` is created (its pods resume from the job's own checkpoint); a Job remedy
  suspended is resumed; a Job still running is left to its own controller (backoffLimit).
- ``annotate``: ``remedy.io/restart-attempt`` is set on the Job for the operator that owns it.

Stop suspends the Job (``spec.suspend``: its pods end, the Job stays) with the reason in
``remedy.io/stopped``. Every action leaves an Event on the Job. In dry run nothing is written
to a Job or a pod: the Event (reason ``RemedyDryRun``) and the returned line say what remedy
would do, and nothing says it was done.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

from kubernetes import client as k8s

from adapters.kubernetes import job_sizes
from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.job_failures import JOB_LABEL, LOG_LINES, REPORTED, FailedPods
from adapters.kubernetes.job_times import JobTimesReader
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.objects import (
    CONTROLLER_MANAGER,
    Json,
    create_raw,
    meta,
    read_raw,
    record_event,
)
from remedy.attribution.elastic import JobShape
from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.goodput import JobTimes
from remedy.attribution.guard import JobRef
from remedy.attribution.jobs import JobState
from remedy.core.errors import ActionFailed, ActionRefused, Conflict, NodeGone, RemedyError
from remedy.core.events import EventReason

RESTART_MODE = "remedy.io/restart"
RESTART_ATTEMPT = "remedy.io/restart-attempt"
RESTART_REASON = "remedy.io/restart-reason"
RESTART_SIZE = "remedy.io/restart-size"  # an elastic job's size, for the operator (annotate)
STOPPED = "remedy.io/stopped"
# Set by the API server on every Job it admits; a copy must not carry the old Job's.
GENERATED_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_NAME = 63  # a Job's name becomes a label value on its pods

log = logging.getLogger(__name__)


class RestartMode(StrEnum):
    RECREATE = "recreate"
    ANNOTATE = "annotate"


def _now() -> datetime:
    return datetime.now(UTC)


class KubernetesJobs:
    """The job side (``JobSide``) on Kubernetes Jobs."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = _now,
        log_lines: int = LOG_LINES,
    ) -> None:
        self.core, self.batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
        self._api, self.dry_run, self._clock = api, dry_run, clock
        self._failures = FailedPods(api, clock=clock, log_lines=log_lines)
        self._times = JobTimesReader(self._failures, clock)

    def job_times(self) -> list[JobTimes]:
        return self._times.job_times()

    def pool_gpus(self) -> dict[str, int]:
        return self._times.pool_gpus()

    # -- failures ------------------------------------------------------------------------
    def failed_pods(self) -> list[GuardedFailure]:
        return self._failures.failed_pods()

    def mark_reported(self, failure: GuardedFailure, guard: str) -> None:
        if self.dry_run:  # bookkeeping, not an action on the job: a log line, not an Event
            log.info(
                "dry run: would mark pod %s/%s reported to %s",
                failure.job.namespace,
                failure.failure.pod,
                guard,
            )
            return
        try:
            with api_errors("patch", "pods"):
                self.core.patch_namespaced_pod(
                    failure.failure.pod,
                    failure.job.namespace,
                    {"metadata": {"annotations": {REPORTED: guard}}},
                    field_manager=CONTROLLER_MANAGER,
                )
        except NodeGone:
            pass  # the pod is gone: it is not listed again either

    # -- the job ---------------------------------------------------------------------------
    def job_state(self, job: JobRef) -> JobState:
        latest = self._latest(job)
        return JobState.GONE if latest is None else _state(latest)

    def _latest(self, job: JobRef) -> Json | None:
        """The guarded job's newest incarnation: the Job itself or remedy's latest copy."""
        # Read as sent, never through the models: the copy a restart makes must keep every
        # field, those of a server newer than the client included.
        listed = list_pages(
            self.batch.list_namespaced_job,
            job.namespace,
            what="jobs",
            label_selector=f"{JOB_LABEL}={job.name}",
        )
        found = [j for j in listed if meta(j).get("labels", {}).get(JOB_LABEL) == job.name]
        try:
            with api_errors("get", "jobs"):
                found.append(read_raw(self.batch.read_namespaced_job, job.name, job.namespace))
        except NodeGone:
            pass
        return max(found, key=_attempt, default=None)

    def job_shape(self, job: JobRef) -> JobShape:
        latest = self._latest(job)
        if latest is None:
            raise ActionFailed(f"job {job} no longer exists")
        with api_errors("list", "pods"):
            return job_sizes.shape(self.core, latest, job.name)

    def checkpoint_job(self, job: JobRef, asked_at: datetime) -> bool:
        latest = self._latest(job)
        if latest is None or self.dry_run:  # dry run: no grow follows, so nothing to ask
            return False
        return job_sizes.checkpointed(self.core, latest, asked_at.isoformat())

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
        latest = self._latest(job)
        if latest is None:
            raise ActionFailed(f"job {job} no longer exists: nothing to restart")
        if _attempt(latest) >= attempt:
            return f"{meta(latest)['name']} already restarted (attempt {attempt})"
        mode = meta(latest).get("annotations", {}).get(RESTART_MODE, RestartMode.RECREATE)
        if mode not in tuple(RestartMode):
            raise ActionRefused(
                f"job {job}: unknown {RESTART_MODE} {mode!r} (recreate or annotate)"
            )
        state, name = _state(latest), meta(latest)["name"]
        marks = {RESTART_ATTEMPT: str(attempt), RESTART_REASON: reason[:1024]}
        if size is not None:
            marks[RESTART_SIZE] = str(size)
        if mode == RestartMode.ANNOTATE:
            if self.dry_run:
                return self._would(
                    job,
                    name,
                    f"request restart {attempt} from the job's operator ({RESTART_ATTEMPT}): "
                    f"{reason}",
                )
            self._patch_job(name, job.namespace, {"metadata": {"annotations": marks}})
            return self._told(
                job,
                name,
                EventReason.RESTART_REQUESTED,
                f"restart {attempt} requested from the job's operator: {reason}",
            )
        if state is JobState.SUCCEEDED:
            return f"{name} completed: nothing to restart"
        resizing = meta(latest).get("annotations", {}).get(job_sizes.RESIZED)
        if grow and state is JobState.RUNNING and not self.dry_run:
            # It checkpointed: end this copy (kept, suspended) and start a larger one.
            self._patch_job(
                name,
                job.namespace,
                {
                    "metadata": {"annotations": {job_sizes.RESIZED: reason[:1024]}},
                    "spec": {"suspend": True},
                },
            )
            resizing = reason
        if grow and (resizing is not None or self.dry_run):
            return self._recreate(job, latest, attempt, marks, size)
        if state is JobState.RUNNING:  # its controller is recreating the pod (backoffLimit)
            if self.dry_run:
                return self._would(
                    job,
                    name,
                    f"note restart {attempt} on the Job; it still runs, and the Job "
                    "controller recreates the failed pod itself",
                )
            self._patch_job(name, job.namespace, {"metadata": {"annotations": marks}})
            return f"{name} still runs: the Job controller recreates the failed pod itself"
        if state is JobState.SUSPENDED:
            stopped = meta(latest).get("annotations", {}).get(STOPPED)
            if stopped is None:
                raise ActionRefused(
                    f"job {name} was suspended by someone else: remedy leaves it suspended"
                )
            if resumed_by is None:
                raise ActionRefused(
                    f"job {name} was stopped by remedy ({stopped}): only a "
                    "person resumes it (remedy resume-job)"
                )
            if self.dry_run:
                return self._would(
                    job, name, f"resume the Job for {resumed_by} (restart {attempt}): {reason}"
                )
            self._patch_job(
                name,
                job.namespace,
                {"metadata": {"annotations": {**marks, STOPPED: None}}, "spec": {"suspend": False}},
            )
            return self._told(
                job,
                name,
                EventReason.RESTARTED,
                f"resumed by {resumed_by} (restart {attempt}): {reason}",
            )
        return self._recreate(job, latest, attempt, marks, size)

    def _recreate(
        self, job: JobRef, failed: Json, attempt: int, marks: dict[str, str], size: int | None
    ) -> str:
        """A fresh copy of the failed Job under a new name (at ``size`` pods, for an elastic
        job); the failed one stays to look at."""
        suffix = f"-r{attempt}"
        name = job.name[: MAX_NAME - len(suffix)] + suffix
        body = _copy_of(failed, name, job, marks)
        if size is not None:
            body["spec"] = job_sizes.resized(body["spec"], size)
        if self.dry_run:
            return self._would(
                job,
                meta(failed)["name"],
                f"create {name} from the failed {meta(failed)['name']} (restart {attempt}): "
                f"{marks[RESTART_REASON]}",
            )
        try:
            with api_errors("create", "jobs"):
                # As it is: the client's create would refuse a field its models do not know.
                create_raw(
                    self._api,
                    f"/apis/batch/v1/namespaces/{job.namespace}/jobs",
                    body,
                    CONTROLLER_MANAGER,
                )
        except Conflict:  # a retried activity already created it
            pass
        return self._told(
            job,
            name,
            EventReason.RESTARTED,
            f"created {name} from the failed {meta(failed)['name']} (restart "
            f"{attempt}): {marks[RESTART_REASON]}",
        )

    def stop_job(self, job: JobRef, reason: str) -> str:
        latest = self._latest(job)
        if latest is None:
            return f"job {job} no longer exists"
        state, name = _state(latest), meta(latest)["name"]
        if state in (JobState.FAILED, JobState.SUCCEEDED, JobState.SUSPENDED):
            if self.dry_run:
                return self._would(
                    job,
                    name,
                    f"stop the job (it is {state.value} and stays so): {reason}",
                    warning=True,
                )
            stays = f"{state.value}; stays so: {reason}"
            return self._told(job, name, EventReason.JOB_STOPPED, stays, warning=True)
        if self.dry_run:
            return self._would(job, name, f"suspend the Job: {reason}", warning=True)
        self._patch_job(
            name,
            job.namespace,
            {"metadata": {"annotations": {STOPPED: reason[:1024]}}, "spec": {"suspend": True}},
        )
        return self._told(job, name, EventReason.JOB_STOPPED, f"suspended: {reason}", warning=True)

    def _patch_job(self, name: str, namespace: str, body: Json) -> None:
        # Every caller says what it would do instead: a write here in dry run is a bug.
        assert not self.dry_run, f"dry run: a patch of job {namespace}/{name}"
        with api_errors("patch", "jobs"):
            self.batch.patch_namespaced_job(name, namespace, body, field_manager=CONTROLLER_MANAGER)

    def _told(
        self, job: JobRef, name: str, reason: str, message: str, *, warning: bool = False
    ) -> str:
        """An Event on the Job (the notice people and alerting see); the same line back."""
        about = k8s.V1ObjectReference(
            kind="Job",
            name=name,
            namespace=job.namespace,
            api_version="batch/v1",
            uid=self._uid_of(name, job.namespace),
        )
        record_event(self.core, about, reason, message, self._clock(), warning=warning)
        return f"{name}: {message}"

    def _uid_of(self, name: str, namespace: str) -> str | None:
        """The Job's uid for its Event (`kubectl describe job` selects by it), if it exists."""
        try:
            with api_errors("get", "jobs"):
                found = read_raw(self.batch.read_namespaced_job, name, namespace)
        except RemedyError:
            return None
        uid: str | None = meta(found).get("uid")
        return uid

    def _would(self, job: JobRef, name: str, what: str, *, warning: bool = False) -> str:
        """Dry run: the Event and the line say what would be done; nothing was."""
        return self._told(job, name, EventReason.DRY_RUN, f"would {what}", warning=warning)


def _state(job: Json) -> JobState:
    conditions = {
        c.get("type"): c.get("status") for c in job.get("status", {}).get("conditions", [])
    }
    if conditions.get("Complete") == "True":
        return JobState.SUCCEEDED
    if conditions.get("Failed") == "True":
        return JobState.FAILED
    if job.get("spec", {}).get("suspend"):
        return JobState.SUSPENDED
    return JobState.RUNNING


def _attempt(job: Json) -> int:
    value = meta(job).get("annotations", {}).get(RESTART_ATTEMPT, "0")
    return int(value) if value.isdigit() else 0


def _copy_of(job: Json, name: str, ref: JobRef, marks: dict[str, str]) -> Json:
    """The Job's spec under a new name, without what the API server generated for the old one
    (its selector and controller-uid labels, unless the selector is the author's own)."""
    spec = copy.deepcopy(job.get("spec", {}))
    spec.pop("suspend", None)
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    labels = {
        k: v
        for k, v in template_meta.get("labels", {}).items()
        if spec.get("manualSelector") or k not in GENERATED_LABELS
    }
    template_meta["labels"] = {**labels, JOB_LABEL: ref.name}
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
    old = meta(job)
    annotations = {
        k: v
        for k, v in old.get("annotations", {}).items()
        if k not in (LAST_APPLIED, STOPPED, job_sizes.RESIZED)
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {
                **{k: v for k, v in old.get("labels", {}).items() if k not in GENERATED_LABELS},
                JOB_LABEL: ref.name,
            },
            "annotations": {**annotations, **marks},
        },
        "spec": spec,
    }
