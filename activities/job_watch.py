"""The fleet scan's job watch: failed pods of guarded jobs, with remedy's ladders on the job's
nodes around each failure (from Temporal's visibility store), handed to the job's guard; and
the guards of jobs that completed or were deleted, ended."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)

from activities.errors import temporal_errors
from activities.starts import described
from contract import activities as act
from contract.messages import JOB_FINISHED, JOB_PROGRESS, POD_FAILED
from contract.names import (
    JOB_GUARD_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
    job_guard_workflow_id,
)
from contract.search_attributes import JOB_STATE, NODE, OUTCOME, RUNBOOK
from remedy.attribution.evidence import FinishedGuards, GuardedFailures, JobFailureReport
from remedy.attribution.goodput import JobGoodput
from remedy.attribution.guard import GuardInput, GuardPhase, JobFinished, JobProgress, JobRef
from remedy.attribution.job_report import (
    GoodputWatch,
    JobsGoodput,
    MeasuredJob,
    measure,
    named,
    progress_due,
)
from remedy.attribution.jobs import GuardedJobs
from remedy.attribution.model import RemediationSeen
from remedy.core.models import Started
from remedy.detection.stragglers.models import StragglerReport
from remedy.redaction import Redactor, redacted
from remedy.runbook import RunbookSet
from remedy.scan.job_symptoms import judge_jobs

WINDOW = timedelta(minutes=10)  # ladders this close to a failure are evidence (the rules' own)


class JobWatchActivities:
    def __init__(
        self,
        client: Client,
        jobs: GuardedJobs,
        runbooks: RunbookSet,
        redactor: Redactor | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._client, self._jobs, self._runbooks = client, jobs, runbooks
        self._redactor = redactor or Redactor()
        self._clock = clock
        # What this process last handed each running guard (by workflow id): progress is
        # coalesced against it (remedy.attribution.job_report.progress_due). Lost on a restart: each
        # guard
        # then hears once more.
        self._handed: dict[str, JobGoodput] = {}
        self._named: dict[str, tuple[str, ...]] = {}  # the nodes its last report named

    @act.GUARDED_JOB_FAILURES.defn
    async def guarded_job_failures(self) -> GuardedFailures:
        """Redacted here, where pods' log tails enter the workflows: the fleet scan's history,
        the guard's signal and every activity after it carry only what is left."""
        with temporal_errors():
            failures = await asyncio.to_thread(self._jobs.failed_pods)
        if not failures:
            return GuardedFailures(failures=[])
        nodes = sorted({n for f in failures for n in [f.failure.node, *f.job_nodes] if n})
        since = min(f.failure.failed_at for f in failures) - WINDOW
        ladders = await self._ladders(nodes, since.isoformat())
        for f in failures:
            on_job = {f.failure.node, *f.job_nodes}
            f.failure.remediations = [ladder for ladder in ladders if ladder.node in on_job]
        return redacted(GuardedFailures(failures=failures), self._redactor)

    async def _ladders(self, nodes: list[str], since: str) -> list[RemediationSeen]:
        listed = ", ".join(f"'{n}'" for n in nodes)
        query = (
            f"WorkflowType = '{NODE_REMEDIATION_WORKFLOW}' AND "
            f"{NODE.name} IN ({listed}) AND "
            f"(ExecutionStatus = 'Running' OR CloseTime >= '{since}')"
        )
        return [self._seen(w) async for w in self._client.list_workflows(query)]

    def _seen(self, w: WorkflowExecution) -> RemediationSeen:
        attrs = w.typed_search_attributes
        runbook = attrs.get(RUNBOOK) or ""
        try:
            cause = self._runbooks.get(runbook).cause.value
        except KeyError:
            cause = "platform"  # a ladder remedy runs is for a machine fault unless it says so
        return RemediationSeen(
            node=attrs.get(NODE) or w.id.split("/", 1)[-1],
            runbook=runbook,
            cause=cause,
            started_at=w.start_time,
            ended_at=w.close_time,
            outcome=attrs.get(OUTCOME) or "",
        )

    @act.REPORT_JOB_FAILURE.defn
    async def report_job_failure(self, report: JobFailureReport) -> Started:
        """Signal-with-start the job's guard, then mark the pod so no scan lists it again.

        A pod that failed before the job's last guard ended belongs to that guard's decision
        (a rank that ended with the job the guard stopped): it must not start a new guard that
        would restart what the last one stopped."""
        job = report.failure.job
        workflow_id = job_guard_workflow_id(job.namespace, job.name)
        if await self._ended_after(workflow_id, report.failure.failure.failed_at):
            with temporal_errors():
                await asyncio.to_thread(self._jobs.mark_reported, report.failure, workflow_id)
            return Started(workflow_id=workflow_id)
        guard = GuardInput(
            job=job,
            policy=report.policy,
            controller_task_queue=report.controller_task_queue,
            node_task_queue=report.node_task_queue,
        )
        handle = await self._start_guard(guard, POD_FAILED.start_with(report.failure.failure))
        with temporal_errors():
            await asyncio.to_thread(self._jobs.mark_reported, report.failure, handle.id)
        return Started(workflow_id=handle.id)

    async def _start_guard(
        self, guard: GuardInput, first: dict[str, Any]
    ) -> WorkflowHandle[Any, Any]:
        """The job's guard, started with its first signal (``start_with``: signal-with-start)."""
        return await self._client.start_workflow(
            JOB_GUARD_WORKFLOW,
            guard,
            id=job_guard_workflow_id(guard.job.namespace, guard.job.name),
            task_queue=guard.controller_task_queue,
            **first,
            static_summary=f"guard of job {guard.job}",
        )

    async def _ended_after(self, workflow_id: str, failed_at: datetime) -> bool:
        guard = await described(self._client, workflow_id)  # None: the job's first failure
        return _ended_after(guard, failed_at)

    @act.END_FINISHED_GUARDS.defn
    async def end_finished_guards(self) -> FinishedGuards:
        """Guards whose job completed or is gone: told so, they end with their ledger."""
        query = f"WorkflowType = '{JOB_GUARD_WORKFLOW}' AND ExecutionStatus = 'Running'"
        ended = []
        async for w in self._client.list_workflows(query):
            _, namespace, name = w.id.split("/", 2)
            job = JobRef(namespace=namespace, name=name)
            with temporal_errors():
                state = await asyncio.to_thread(self._jobs.job_state, job)
            if state.finished:
                handle = self._client.get_workflow_handle(w.id)
                await JOB_FINISHED.send(handle, JobFinished(reason=f"the job {state.value}"))
                ended.append(str(job))
        return FinishedGuards(jobs=ended)

    @act.JOB_GOODPUT.defn
    async def job_goodput(self, watch: GoodputWatch) -> JobsGoodput:
        """Measure every guarded job and hand each its figures: a running job gets a guard
        if it has none (so success counts jobs that never failed), a guard that ended is left."""
        with temporal_errors():
            times = await asyncio.to_thread(self._jobs.job_times)
            gpus = await asyncio.to_thread(self._jobs.pool_gpus)
        now = self._clock()
        measured = measure(times, gpus, now)
        reports = {r.job: r for r in judge_jobs(times, now, watch.policy.suspicions.stragglers)}
        handed: dict[str, JobGoodput] = {}
        for job in measured.jobs:
            report = reports.get(job.goodput.job)
            workflow_id, goodput = await self._hand(job, watch, report)
            if goodput is not None:
                handed[workflow_id] = goodput
            if goodput is job.goodput:  # handed now, with this report
                self._named[workflow_id] = named(report)
        self._handed = handed  # jobs no longer measured are forgotten
        self._named = {w: n for w, n in self._named.items() if w in handed}
        return measured

    async def _hand(
        self, job: MeasuredJob, watch: GoodputWatch, report: StragglerReport | None
    ) -> tuple[str, JobGoodput | None]:
        """A running guard gets the figures (and the straggler report) when they are due and
        it is not held; a running job with no guard gets one. Returns the figures the guard
        holds now (None: no guard)."""
        namespace, name = job.goodput.job.split("/", 1)
        workflow_id = job_guard_workflow_id(namespace, name)
        progress = JobProgress(goodput=job.goodput, stragglers=report)
        guard = await described(self._client, workflow_id)
        last = self._handed.get(workflow_id)
        changed = named(report) != self._named.get(workflow_id, ())
        if guard is not None and guard.status is WorkflowExecutionStatus.RUNNING:
            if guard.typed_search_attributes.get(JOB_STATE) == GuardPhase.HELD.value:
                return workflow_id, last  # stopped, waiting for a person: nothing to measure
            if not progress_due(last, job.goodput, changed):
                return workflow_id, last
            await JOB_PROGRESS.send_if_running(
                self._client.get_workflow_handle(workflow_id), progress
            )
            return workflow_id, job.goodput
        # A guard that ended after the job's newest pod started stopped it or saw it end.
        if not job.running or _ended_after(guard, job.since or self._clock()):
            return workflow_id, None
        start = GuardInput(
            job=JobRef(namespace=namespace, name=name),
            policy=watch.policy,
            controller_task_queue=watch.controller_task_queue,
            node_task_queue=watch.node_task_queue,
        )
        await self._start_guard(start, JOB_PROGRESS.start_with(progress))
        return workflow_id, job.goodput

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.guarded_job_failures,
            self.report_job_failure,
            self.end_finished_guards,
            self.job_goodput,
        ]


def _ended_after(guard: WorkflowExecutionDescription | None, at: datetime) -> bool:
    """The guard (None: none ever ran) closed at or after ``at``."""
    return (
        guard is not None
        and guard.status is not WorkflowExecutionStatus.RUNNING
        and guard.close_time is not None
        and at <= guard.close_time
    )
