"""The failed pods of guarded jobs, with what the cluster knows of each: how it ended, its log
tail, and the conditions and Xids of the nodes its job ran on. A job opts in with the label
``remedy.io/guard: "true"`` on the Job and its pod template."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from kubernetes import client as k8s
from pydantic import TypeAdapter, ValidationError

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.marks import remedy_conditions
from adapters.kubernetes.objects import RECENT_XIDS, Json, as_json, gpu_count, meta, timestamp
from remedy.attribution.evidence import GuardedFailure, PodRun, RecentXid, tie_xids
from remedy.attribution.guard import JobRef
from remedy.attribution.model import PodFailure, Termination, XidSeen
from remedy.core.errors import NodeGone, RemedyError
from remedy.core.models import Finding
from remedy.detection.conditions import is_problem
from remedy.scan.fleet import finding_from_condition

log = logging.getLogger(__name__)

GUARD_LABEL = "remedy.io/guard"
JOB_LABEL = "remedy.io/job"  # the guarded job's name, on remedy's restarted copies
# Where a pod's job name comes from: remedy's copies first, then what the Job controller sets.
JOB_NAME_LABELS = (JOB_LABEL, "batch.kubernetes.io/job-name", "job-name")
REPORTED = "remedy.io/failure-reported"  # on a failed pod its guard has: never listed again
LOG_LINES = 100


class FailedPods:
    """The reading side of ``KubernetesJobs`` (it writes nothing): what a scan hands to the
    job guards."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        clock: Callable[[], datetime],
        log_lines: int = LOG_LINES,
    ) -> None:
        self.core = k8s.CoreV1Api(api)
        self._api, self.clock, self._log_lines = api, clock, log_lines

    def json(self, obj: object) -> Json:
        return as_json(self._api, obj)

    def failed_pods(self) -> list[GuardedFailure]:
        """One list of failed guarded pods per scan; only a job with a new failure has its
        other pods listed too (for the nodes it ran on)."""
        by_job: dict[JobRef, list[Json]] = {}
        for pod in self.guarded_pods(None, field_selector="status.phase=Failed"):
            job = job_of(pod)
            if job and _failed(pod) and REPORTED not in meta(pod).get("annotations", {}):
                by_job.setdefault(job, []).append(pod)
        evidence = _NodeEvidence(self)
        out = []
        for job, failed in by_job.items():
            pods = [p for p in self.guarded_pods(job.namespace) if job_of(p) == job]
            job_nodes = sorted(
                {n for p in [*failed, *pods] if (n := p.get("spec", {}).get("nodeName"))}
            )
            out += [self._failure(pod, job, job_nodes, evidence) for pod in failed]
        return out

    def guarded_pods(self, namespace: str | None, field_selector: str | None = None) -> list[Json]:
        everywhere = (self.core.list_pod_for_all_namespaces,)
        call = (self.core.list_namespaced_pod, namespace) if namespace else everywhere
        listed = list_pages(
            *call,
            what="pods",
            label_selector=f"{GUARD_LABEL}=true",
            field_selector=field_selector,
        )
        return [
            p
            for p in listed  # the selector, belt and braces
            if meta(p).get("labels", {}).get(GUARD_LABEL) == "true"
        ]

    def _failure(
        self, pod: Json, job: JobRef, job_nodes: list[str], evidence: _NodeEvidence
    ) -> GuardedFailure:
        node = pod.get("spec", {}).get("nodeName") or ""  # "": it never got a node
        term, container, ended = termination(pod)
        findings = [f for n in job_nodes for f in evidence.findings(n)]
        xids = [x for n in job_nodes for x in evidence.xids(n)]
        failure = PodFailure(
            job=str(job),
            pod=meta(pod)["name"],
            node=node,
            failed_at=ended or self.clock(),
            termination=term,
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


class _NodeEvidence:
    """What one scan reads of each node once: gone or not, problem conditions, kept Xids."""

    def __init__(self, reader: FailedPods) -> None:
        self._reader = reader
        self._nodes: dict[str, Json | None] = {}
        self._xids: dict[str, list[XidSeen]] = {}

    def _node(self, name: str) -> Json | None:
        if name not in self._nodes:
            try:
                with api_errors("get", f"nodes/{name}"):
                    self._nodes[name] = self._reader.json(self._reader.core.read_node(name))
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
            for c in remedy_conditions(node, self._reader.clock())
            if is_problem(c)
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
        listed = list_pages(
            self._reader.core.list_pod_for_all_namespaces,
            what="pods",
            field_selector=f"spec.nodeName={name}",
        )
        return [
            PodRun(
                job=str(job) if (job := job_of(p)) else None,
                gpus=gpu_count(p),
                started_at=timestamp(p.get("status", {}).get("startTime")),
                ended_at=termination(p)[2] if _failed(p) or succeeded(p) else None,
            )
            for p in listed
            if p.get("spec", {}).get("nodeName") == name
        ]


def job_of(pod: Json) -> JobRef | None:
    labels = meta(pod).get("labels", {})
    name = next((labels[k] for k in JOB_NAME_LABELS if labels.get(k)), None)
    return JobRef(namespace=meta(pod).get("namespace", "default"), name=name) if name else None


def _failed(pod: Json) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Failed")


def succeeded(pod: Json) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Succeeded")


def termination(pod: Json) -> tuple[Termination, str | None, datetime | None]:
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
