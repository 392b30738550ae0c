"""`remedy status --jobs`: every guarded job — its guard's phase, its goodput, size and end, and
the time it lost to platform, application and unknown failures — from the JobGuard workflows;
then job success over the jobs that ended."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from contract.messages import GUARD_STATUS, JOB_LEDGER
from contract.names import JOB_GUARD_WORKFLOW
from remedy.attribution.goodput import Outcome, success_rate
from remedy.attribution.guard import GuardAction, GuardPhase, GuardResult, JobLedger
from remedy.attribution.job_report import percent
from remedy.attribution.model import Verdict
from remedy.core.durations import format_duration
from workflows.job_guard import JobGuard

RECENT = 200  # guards listed at most, newest first
QUERY_TIMEOUT = timedelta(seconds=5)
UNANSWERED = "no answer (is a controller running?)"


class JobRow(BaseModel):
    job: str
    phase: str
    ledger: JobLedger

    def lost(self, verdict: Verdict) -> timedelta:
        return self.ledger.lost(verdict)


async def job_rows(client: Client) -> list[JobRow]:
    rows = []
    async for w in client.list_workflows(f"WorkflowType = '{JOB_GUARD_WORKFLOW}'", limit=RECENT):
        handle = client.get_workflow_handle_for(JobGuard.run, w.id, run_id=w.run_id)
        if w.status is WorkflowExecutionStatus.RUNNING:
            rows.append(await _running_row(handle, w.id))
        elif w.status is WorkflowExecutionStatus.COMPLETED:
            result = await handle.result()
            rows.append(JobRow(job=str(result.job), phase=result.phase.value, ledger=result.ledger))
    latest: dict[str, JobRow] = {}
    for row in rows:  # newest first: keep each job's latest guard
        latest.setdefault(row.job, row)
    return sorted(latest.values(), key=lambda r: r.job)


async def _running_row(handle: WorkflowHandle[JobGuard, GuardResult], workflow_id: str) -> JobRow:
    """A running guard answers queries through a controller worker; with none polling (the
    controller is down) it cannot, and the row says so instead of failing the whole list."""
    try:
        ledger = await JOB_LEDGER.ask(handle, rpc_timeout=QUERY_TIMEOUT)
        status = await GUARD_STATUS.ask(handle, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError):
        job = workflow_id.split("/", 1)[-1]
        return JobRow(job=job, phase=UNANSWERED, ledger=JobLedger(job=job))
    return JobRow(job=ledger.job, phase=status.phase.value, ledger=ledger)


HEADERS = [
    "job",
    "guard",
    "goodput",
    "size",
    "ended",
    "platform",
    "lost",
    "application",
    "lost",
    "unknown",
    "lost",
    "last",
]


def table_rows(rows: list[JobRow]) -> list[list[str]]:
    out = []
    for row in rows:
        ledger, shape = row.ledger, row.ledger.shape
        end = ledger.end
        cells = [
            row.job,
            row.phase.replace("_", " "),
            percent(ledger.goodput.ratio if ledger.goodput else None),
            f"{shape.size}/{shape.elastic.max}" if shape and shape.elastic else "-",
            f"{end.outcome.value} {end.cause}".rstrip() if end else "-",
        ]
        for verdict in (Verdict.PLATFORM, Verdict.APPLICATION, Verdict.UNKNOWN):
            cells += [str(row.ledger.count(verdict)), format_duration(row.lost(verdict))]
        acted = [f for f in row.ledger.failures if f.decision.action is not GuardAction.JOINED]
        last = acted[-1] if acted else None
        cells.append(f"{last.attribution.rule} → {last.decision.action.value}" if last else "-")
        out.append(cells)
    return out


def held(rows: list[JobRow]) -> list[str]:
    return [r.job for r in rows if r.phase == GuardPhase.HELD.value]


def job_success(rows: list[JobRow]) -> str:
    """Succeeded over succeeded and failed, and the failures by cause."""
    ends = [r.ledger.end for r in rows if r.ledger.end is not None]
    causes: dict[str, int] = {}
    for end in ends:
        if end.outcome is Outcome.FAILED:
            causes[end.cause] = causes.get(end.cause, 0) + 1
    counted = sum(1 for e in ends if e.outcome is not Outcome.DELETED)
    failed = ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items())) or "none"
    return (
        f"job success: {percent(success_rate(ends))} of {counted} ended (failed by cause: {failed})"
    )
