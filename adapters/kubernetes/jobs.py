"""Guarded Kubernetes Jobs on the official client: their failed pods with what the cluster knows
of each (termination, disruption, log tail, the nodes' conditions and Xids), and restarting or
stopping a job by the Job's own mechanism.

A job opts in with the label ``remedy.io/guard: "true"`` on the Job and its pod template.
Restart, by the Job's ``remedy.io/restart`` annotation:

- ``recreate`` (default): a failed Job is left as it is for the post-mortem and a copy named
  ``<job>-r<attempt>`` is created (its pods resume from the job's own checkpoint); a Job remedy
  suspended is resumed; a Job still running is left to its own controller (backoffLimit).
- ``annotate``: ``remedy.io/restart-attempt`` is set on the Job for the operator that owns it.

Stop suspends the Job (``spec.suspend``: its pods end, the Job stays) with the reason in
``remedy.io/stopped``. Every action leaves an Event on the Job.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum

from kubernetes import client as k8s
from pydantic import TypeAdapter, ValidationError

from adapters.kubernetes.cluster import remedy_conditions
from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.objects import RECENT_XIDS, Json, gpu_count, meta, record_event, timestamp
from remedy.attribution.evidence import GuardedFailure, PodRun, RecentXid, tie_xids
from remedy.attribution.guard import JobRef
from remedy.attribution.jobs import JobState
from remedy.attribution.model import PodFailure, Termination, XidSeen
from remedy.errors import ActionFailed, ActionRefused, NodeGone, RemedyError
from remedy.fleet import finding_from_condition
from remedy.models import Finding

log = logging.getLogger(__name__)

GUARD_LABEL = "remedy.io/guard"
JOB_LABEL = "remedy.io/job"  # the guarded job's name, on remedy's restarted copies
# Where a pod's job name comes from: remedy's copies first, then what the Job controller sets.
JOB_NAME_LABELS = (JOB_LABEL, "batch.kubernetes.io/job-name", "job-name")
REPORTED = "remedy.io/failure-reported"  # on a failed pod its guard has: never listed again
RESTART_MODE = "remedy.io/restart"
RESTART_ATTEMPT = "remedy.io/restart-attempt"
RESTART_REASON = "remedy.io/restart-reason"
STOPPED = "remedy.io/stopped"
# Set by the API server on every Job it admits; a copy must not carry the old Job's.
GENERATED_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
LOG_LINES = 100
MAX_NAME = 63  # a Job's name becomes a label value on its pods


class RestartMode(StrEnum):
    RECREATE = "recreate"
    ANNOTATE = "annotate"


def _now() -> datetime:
    return datetime.now(UTC)


class KubernetesJobs:
    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = _now,
        log_lines: int = LOG_LINES,
    ) -> None:
        self.core, self.batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
        self._api, self.dry_run, self._clock, self._log_lines = api, dry_run, clock, log_lines

    def _json(self, obj: object) -> Json:
        out: Json = self._api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return out

    # -- failures ------------------------------------------------------------------------
    def failed_pods(self) -> list[GuardedFailure]:
        """One list of failed guarded pods per scan; only a job with a new failure has its
        other pods listed too (for the nodes it ran on)."""
        by_job: dict[JobRef, list[Json]] = {}
        for pod in self._guarded_pods(None, field_selector="status.phase=Failed"):
            job = _job_of(pod)
            if job and _failed(pod) and REPORTED not in meta(pod).get("annotations", {}):
                by_job.setdefault(job, []).append(pod)
        evidence = _NodeEvidence(self)
        out = []
        for job, failed in by_job.items():
            pods = [p for p in self._guarded_pods(job.namespace) if _job_of(p) == job]
            job_nodes = sorted(
                {n for p in [*failed, *pods] if (n := p.get("spec", {}).get("nodeName"))}
            )
            out += [self._failure(pod, job, job_nodes, evidence) for pod in failed]
        return out

    def _guarded_pods(self, namespace: str | None, field_selector: str | None = None) -> list[Json]:
        selector = f"{GUARD_LABEL}=true"
        with api_errors("list", "pods"):
            listed = (
                self.core.list_namespaced_pod(
                    namespace, label_selector=selector, field_selector=field_selector
                )
                if namespace
                else self.core.list_pod_for_all_namespaces(
                    label_selector=selector, field_selector=field_selector
                )
            )
        return [
            p
            for p in self._json(listed).get("items", [])  # the selector, belt and braces
            if meta(p).get("labels", {}).get(GUARD_LABEL) == "true"
        ]

    def _failure(
        self, pod: Json, job: JobRef, job_nodes: list[str], evidence: _NodeEvidence
    ) -> GuardedFailure:
        node = pod.get("spec", {}).get("nodeName") or ""  # "": it never got a node
        termination, container, ended = _termination(pod)
        findings = [f for n in job_nodes for f in evidence.findings(n)]
        xids = [x for n in job_nodes for x in evidence.xids(n)]
        failure = PodFailure(
            job=str(job),
            pod=meta(pod)["name"],
            node=node,
            failed_at=ended or self._clock(),
            termination=termination,
            log_tail=self._log_tail(pod, container) if not evidence.gone(node) else "",
            node_gone=evidence.gone(node),
            findings=findings,
            xids=xids,
        )
        return GuardedFailure(
            job=job, pod_uid=meta(pod).get("uid", ""), failure=failure, job_nodes=job_nodes
        )

    def _log_tail(self, pod: Json, container: str | None) -> str:
        """The last lines of the failed container's log; "" when the kubelet cannot say."""
        try:
            with api_errors("get", "pods/log"):
                text = self.core.read_namespaced_pod_log(
                    meta(pod)["name"],
                    meta(pod)["namespace"],
                    container=container,
                    tail_lines=self._log_lines,
                )
        except RemedyError as exc:
            log.info("no log for %s: %s", meta(pod)["name"], exc)
            return ""
        return str(text)[-16_000:]

    def mark_reported(self, failure: GuardedFailure, guard: str) -> None:
        if self.dry_run:
            return
        try:
            with api_errors("patch", "pods"):
                self.core.patch_namespaced_pod(
                    failure.failure.pod,
                    failure.job.namespace,
                    {"metadata": {"annotations": {REPORTED: guard}}},
                )
        except NodeGone:
            pass  # the pod is gone: it is not listed again either

    # -- the job ---------------------------------------------------------------------------
    def job_state(self, job: JobRef) -> JobState:
        latest = self._latest(job)
        return JobState.GONE if latest is None else _state(latest)

    def _latest(self, job: JobRef) -> Json | None:
        """The guarded job's newest incarnation: the Job itself or remedy's latest copy."""
        with api_errors("list", "jobs"):
            listed = self._json(
                self.batch.list_namespaced_job(
                    job.namespace, label_selector=f"{JOB_LABEL}={job.name}"
                )
            )
        found = [
            j
            for j in listed.get("items", [])
            if meta(j).get("labels", {}).get(JOB_LABEL) == job.name
        ]
        try:
            with api_errors("get", "jobs"):
                found.append(self._json(self.batch.read_namespaced_job(job.name, job.namespace)))
        except NodeGone:
            pass
        return max(found, key=_attempt, default=None)

    def restart_job(
        self, job: JobRef, attempt: int, reason: str, resumed_by: str | None = None
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
        if mode == RestartMode.ANNOTATE:
            self._patch_job(name, job.namespace, {"metadata": {"annotations": marks}})
            return self._told(
                job,
                name,
                "RemedyRestartRequested",
                f"restart {attempt} requested from the job's operator: {reason}",
            )
        if state is JobState.SUCCEEDED:
            return f"{name} completed: nothing to restart"
        if state is JobState.RUNNING:  # its controller is recreating the pod (backoffLimit)
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
            self._patch_job(
                name,
                job.namespace,
                {"metadata": {"annotations": {**marks, STOPPED: None}}, "spec": {"suspend": False}},
            )
            return self._told(
                job,
                name,
                "RemedyRestarted",
                f"resumed by {resumed_by} (restart {attempt}): {reason}",
            )
        return self._recreate(job, latest, attempt, marks)

    def _recreate(self, job: JobRef, failed: Json, attempt: int, marks: dict[str, str]) -> str:
        """A fresh copy of the failed Job under a new name; the failed one stays to look at."""
        suffix = f"-r{attempt}"
        name = job.name[: MAX_NAME - len(suffix)] + suffix
        body = _copy_of(failed, name, job, marks)
        if self.dry_run:
            return self._told(job, meta(failed)["name"], "RemedyDryRun", f"would create {name}")
        try:
            with api_errors("create", "jobs"):
                # A dict body goes out as it is: the copy keeps fields the models may not know.
                self.batch.create_namespaced_job(job.namespace, body)  # type: ignore[arg-type]
        except RemedyError as exc:
            if "409" not in str(exc):  # 409: a retried activity already created it
                raise
        return self._told(
            job,
            name,
            "RemedyRestarted",
            f"created {name} from the failed {meta(failed)['name']} (restart "
            f"{attempt}): {marks[RESTART_REASON]}",
        )

    def stop_job(self, job: JobRef, reason: str) -> str:
        latest = self._latest(job)
        if latest is None:
            return f"job {job} no longer exists"
        state, name = _state(latest), meta(latest)["name"]
        if state in (JobState.FAILED, JobState.SUCCEEDED, JobState.SUSPENDED):
            return self._told(
                job, name, "RemedyJobStopped", f"{state.value}; stays so: {reason}", warning=True
            )
        self._patch_job(
            name,
            job.namespace,
            {"metadata": {"annotations": {STOPPED: reason[:1024]}}, "spec": {"suspend": True}},
        )
        return self._told(job, name, "RemedyJobStopped", f"suspended: {reason}", warning=True)

    def _patch_job(self, name: str, namespace: str, body: Json) -> None:
        if self.dry_run:
            return
        with api_errors("patch", "jobs"):
            self.batch.patch_namespaced_job(name, namespace, body)

    def _told(
        self, job: JobRef, name: str, reason: str, message: str, *, warning: bool = False
    ) -> str:
        """An Event on the Job (the notice people and alerting see); the same line back."""
        about = k8s.V1ObjectReference(
            kind="Job", name=name, namespace=job.namespace, api_version="batch/v1"
        )
        record_event(self.core, about, reason, message, self._clock(), warning=warning)
        return f"{name}: {message}"


class _NodeEvidence:
    """What one scan reads of each node once: gone or not, problem conditions, kept Xids."""

    def __init__(self, jobs: KubernetesJobs) -> None:
        self._jobs = jobs
        self._nodes: dict[str, Json | None] = {}
        self._xids: dict[str, list[XidSeen]] = {}

    def _node(self, name: str) -> Json | None:
        if name not in self._nodes:
            try:
                with api_errors("get", f"nodes/{name}"):
                    self._nodes[name] = self._jobs._json(self._jobs.core.read_node(name))
            except NodeGone:
                self._nodes[name] = None
        return self._nodes[name]

    def gone(self, name: str) -> bool:
        return bool(name) and self._node(name) is None

    def findings(self, name: str) -> list[Finding]:
        node = self._node(name)
        if node is None:
            return []
        return [
            finding_from_condition(name, c)
            for c in remedy_conditions(node, self._jobs._clock())
            if c.status == "True"
        ]

    def xids(self, name: str) -> list[XidSeen]:
        if name not in self._xids:
            node = self._node(name)
            kept = meta(node).get("annotations", {}).get(RECENT_XIDS) if node else None
            try:
                recent = TypeAdapter(list[RecentXid]).validate_json(kept or "[]")
            except ValidationError:
                log.warning("node %s: unreadable %s annotation", name, RECENT_XIDS)
                recent = []
            self._xids[name] = tie_xids(name, recent, self._pods_on(name)) if recent else []
        return self._xids[name]

    def _pods_on(self, name: str) -> list[PodRun]:
        with api_errors("list", "pods"):
            listed = self._jobs._json(
                self._jobs.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}")
            )
        return [
            PodRun(
                job=str(job) if (job := _job_of(p)) else None,
                gpus=gpu_count(p),
                started_at=timestamp(p.get("status", {}).get("startTime")),
                ended_at=_termination(p)[2] if _failed(p) or _succeeded(p) else None,
            )
            for p in listed.get("items", [])
            if p.get("spec", {}).get("nodeName") == name
        ]


def _job_of(pod: Json) -> JobRef | None:
    labels = meta(pod).get("labels", {})
    name = next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), None)
    return JobRef(namespace=meta(pod).get("namespace", "default"), name=name) if name else None


def _failed(pod: Json) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Failed")


def _succeeded(pod: Json) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Succeeded")


def _termination(pod: Json) -> tuple[Termination, str | None, datetime | None]:
    """How the pod ended: the first container that failed (else the first that ended), the
    cluster's DisruptionTarget reason, and when."""
    status = pod.get("status", {})
    ended = [
        (c["name"], c["state"]["terminated"])
        for c in status.get("containerStatuses", [])
        if c.get("state", {}).get("terminated")
    ]
    ended.sort(key=lambda pair: pair[1].get("exitCode", 0) == 0)  # failures first
    disruption = next(
        (
            c
            for c in status.get("conditions", [])
            if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        ),
        None,
    )
    container, state = ended[0] if ended else (None, {})
    at = timestamp(state.get("finishedAt")) or timestamp(
        (disruption or {}).get("lastTransitionTime")
    )
    return (
        Termination(
            exit_code=state.get("exitCode"),
            reason=state.get("reason") or status.get("reason", ""),
            disruption=disruption.get("reason") if disruption else None,
            message=(state.get("message") or status.get("message", ""))[:1024],
        ),
        container,
        at,
    )


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
        k: v for k, v in old.get("annotations", {}).items() if k not in (LAST_APPLIED, STOPPED)
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
