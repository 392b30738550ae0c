"""The job guard's side effects: attribute a failure (the rules file is read here, not in the
workflow), restart or stop a job, and make sure a node blamed for a failure is in remediation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from activities.errors import temporal_errors
from activities.starts import described, start_remediation
from contract import activities as act
from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.attribution.elastic import JobShape
from remedy.attribution.guard import (
    Checkpointed,
    CheckpointRequest,
    JobRef,
    NodeBlame,
    RestartRequest,
    StopRequest,
)
from remedy.attribution.jobs import JobControl
from remedy.attribution.model import Attribution, PodFailure
from remedy.attribution.rules import Attributor
from remedy.attribution.suspicions import ProofCheck, ProofSeen, SuspicionState
from remedy.core.models import Done, Finding, Severity, Started
from remedy.ladder.remediation import Escalation, FindingReport, RemediationResult
from remedy.runbook import DEFAULT_RUNBOOK, RunbookSet

JOB_PLATFORM_FAILURE = "JobPlatformFailure"  # the finding a guard reports against a node


class JobActivities:
    def __init__(
        self,
        client: Client,
        jobs: JobControl,
        runbooks: RunbookSet,
        attributor: Attributor | None = None,
        seal: bytes = b"",
    ) -> None:
        self._client, self._jobs, self._runbooks, self._seal = client, jobs, runbooks, seal
        self._attributor = attributor or Attributor()

    @act.ATTRIBUTE_FAILURE.defn
    def attribute_failure(self, failure: PodFailure) -> Attribution:
        return self._attributor.attribute(failure)

    @act.RESTART_JOB.defn
    def restart_job(self, req: RestartRequest) -> Done:
        with temporal_errors():
            detail = self._jobs.restart_job(
                req.job, req.attempt, req.reason, req.resumed_by, size=req.size, grow=req.grow
            )
        return Done(detail=detail)

    @act.JOB_SHAPE.defn
    def job_shape(self, job: JobRef) -> JobShape:
        with temporal_errors():
            return self._jobs.job_shape(job)

    @act.CHECKPOINT_JOB.defn
    def checkpoint_job(self, req: CheckpointRequest) -> Checkpointed:
        with temporal_errors():
            done = self._jobs.checkpoint_job(req.job, req.asked_at)
        return Checkpointed(done=done)

    @act.STOP_JOB.defn
    def stop_job(self, req: StopRequest) -> Done:
        with temporal_errors():
            return Done(detail=self._jobs.stop_job(req.job, req.reason))

    @act.REMEDIATE_BLAMED_NODE.defn
    async def remediate_blamed_node(self, blame: NodeBlame) -> Started:
        """Start a ladder for the node, or join the one running (signal-with-start). A ladder
        that already ran for the fault (its agent reported the Xid before the job died) owns
        it: the job's failure does not start the node's remediation over."""
        workflow_id = remediation_workflow_id(blame.node.name)
        since = blame.failed_at - self._attributor.rules.window
        if await self._ladder_closed_since(workflow_id, since):
            return Started(workflow_id=workflow_id)  # that ladder already remediated the fault
        finding = Finding(
            node=blame.node.name,
            check="job",
            reason=JOB_PLATFORM_FAILURE,
            severity=Severity.CRITICAL,
            observed_at=datetime.now(UTC),
            evidence=f"job {blame.job}: " + "; ".join(blame.attribution.evidence),
        )
        runbook = self._runbooks.match(finding) or DEFAULT_RUNBOOK
        handle = await start_remediation(
            self._client,
            blame.node,
            FindingReport(finding=finding, runbook=runbook),
            node_task_queue=blame.node_task_queue,
            task_queue=blame.task_queue,
            seal=self._seal,
        )
        return Started(workflow_id=handle.id)

    async def _ladder_closed_since(self, workflow_id: str, since: datetime) -> bool:
        ladder = await described(self._client, workflow_id)
        return (
            ladder is not None
            and ladder.status is not WorkflowExecutionStatus.RUNNING
            and ladder.start_time >= since
        )

    @act.LADDER_PROOF.defn
    async def ladder_proof(self, check: ProofCheck) -> ProofSeen:
        """Proven as soon as the ladder took on the runbook of a fault its proving rung found
        (it climbs on: cordon, drain, ...); unproven once it ended without one."""
        ladder = await described(self._client, check.ladder)
        if ladder is None:
            return ProofSeen(state=SuspicionState.UNPROVEN, detail="no ladder ran for it")
        handle = self._client.get_workflow_handle(
            check.ladder, run_id=ladder.run_id, result_type=RemediationResult
        )
        if ladder.status is WorkflowExecutionStatus.RUNNING:
            state = await REMEDIATION_STATE.ask(handle)
            return _proof(state.escalations) or ProofSeen()
        if ladder.status is not WorkflowExecutionStatus.COMPLETED:
            ended = ladder.status.name.lower() if ladder.status else "closed"
            return ProofSeen(state=SuspicionState.UNPROVEN, detail=f"ladder {ended}")
        result = await handle.result()
        said = f"ladder {result.outcome.value}: {result.detail}"
        return _proof(result.escalations) or ProofSeen(state=SuspicionState.UNPROVEN, detail=said)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.attribute_failure,
            self.restart_job,
            self.stop_job,
            self.remediate_blamed_node,
            self.job_shape,
            self.checkpoint_job,
            self.ladder_proof,
        ]


def _proof(escalations: list[Escalation]) -> ProofSeen | None:
    proven = [e for e in escalations if e.kind == "proven"]
    if not proven:
        return None
    e = proven[0]
    return ProofSeen(
        state=SuspicionState.PROVEN, detail=f"{e.because}: {e.to_runbook} from {e.at:%H:%M}"
    )
