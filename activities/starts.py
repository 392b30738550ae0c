"""Starting or joining a node's workflows from outside a workflow: signal-with-start, so a
second report for the same node joins the run already going. Used by the reporters (agent,
CLI, demo) and by activities on behalf of workflows, which can signal but not start."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from contract import activities as act
from contract.messages import REPORT_FINDING
from contract.names import (
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
    active_check_workflow_id,
    admission_workflow_id,
    node_task_queue,
    remediation_workflow_id,
)
from contract.search_attributes import OUTCOME
from remedy.core.errors import ActionRefused, TransientError
from remedy.core.models import Finding, NodeRef, Severity, Started
from remedy.ladder.describe import static_summary
from remedy.ladder.intake import MatchedRunbook, RemediationStart, by_controller
from remedy.ladder.remediation import (
    MAX_REPORT_BYTES,
    FindingReport,
    Outcome,
    RemediationInput,
    RemediationResult,
)
from remedy.runbook import DEFAULT_RUNBOOK, RunbookSet
from remedy.scan.admission import ADMISSION_FAILED, AdmissionInput
from remedy.scan.fleet import (
    ConditionStart,
    FindingStart,
    NodeNames,
    finding_from_condition,
)
from remedy.scan.liveness import SKEW_TOLERANCE
from remedy.scan.orphans import OrphanCheck, orphaned_cordon

log = logging.getLogger(__name__)
# A ladder that ended so owned nothing when it stopped: a cordon of its left on the node is
# nobody's. (needs_human, aborted and replaced leave it to a person or to the replacement.)
NOBODY_FINISHED = (
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
)
GAVE_IT_BACK = (Outcome.RECOVERED.value, Outcome.CLEARED.value)  # yet the cordon stayed


async def described(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The latest run of the workflow id; None when it never ran."""
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise
    except TypeError:  # a null Datetime search attribute (the time-skipping server's)
        return await _described_without_nulls(client, workflow_id)


async def _described_without_nulls(
    client: Client, workflow_id: str
) -> WorkflowExecutionDescription:
    """The time-skipping test server (rehearsals, tests) keeps an unset Datetime search
    attribute as a null the SDK cannot decode; the real server drops it. Read the description
    raw and leave those out."""
    raw = await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id)
        )
    )
    fields = raw.workflow_execution_info.search_attributes.indexed_fields
    for key in [k for k, v in fields.items() if v.data in (b"null", b"")]:
        del fields[key]
    return await WorkflowExecutionDescription._from_raw_description(
        raw, namespace=client.namespace, converter=client.data_converter
    )


async def start_remediation(
    client: Client,
    node: NodeRef,
    report: FindingReport,
    *,
    node_task_queue: str,
    task_queue: str,
    node_pickup_timeout: timedelta | None = None,
    workflow: Any = NODE_REMEDIATION_WORKFLOW,
    seal: bytes | None = None,
) -> WorkflowHandle[Any, Any]:
    """``workflow``: the type's name, or its run method for a typed handle. ``seal``: the
    report is the controller's own, sealed with it (remedy.ladder.intake); else it carries its
    sender's proof already.

    A stale report starts nothing: when the node's last ladder finished having received this
    very finding, and each one folded into it (a duplicate delivered late, a report retried
    after the ladder was over), its own verification already superseded it — the finished
    ladder's handle comes back. So does a finding an earlier ladder received: each ladder
    passes on what the node's ladders handled (``handled_before``). Told apart by the finding
    itself, not by comparing the reporter's clock with the server's: a new fault seen a second
    after a recovery must start a ladder. A ladder that did not finish (terminated, failed)
    handled nothing: any report starts a new one."""
    workflow_id = remediation_workflow_id(node.name)
    if seal is not None:
        report = by_controller(report, seal, datetime.now(UTC))
    if (size := len(report.model_dump_json())) > MAX_REPORT_BYTES:  # the ladder reads none
        raise ActionRefused(f"a report of {size:,} bytes, over the limit of {MAX_REPORT_BYTES:,}")
    inp = RemediationInput(node=node, node_task_queue=node_task_queue)
    if node_pickup_timeout is not None:
        inp.node_pickup_timeout = node_pickup_timeout
    start: dict[str, Any] = {
        "id": workflow_id,
        "task_queue": task_queue,
        **REPORT_FINDING.start_with(report),
        # What the UI's workflow list shows; ignored when the report joins a running ladder.
        "static_summary": static_summary(node.name, report.finding, report.runbook),
    }
    # One call for what a storm's reports mostly are: a node that never had a ladder (a new
    # one starts) or one whose ladder is running (the report joins it). The server refuses it
    # only when the node's last ladder is over; that ladder's result then says whether the
    # report is stale.
    try:
        return await client.start_workflow(
            workflow, inp, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE, **start
        )
    except WorkflowAlreadyStartedError:
        pass
    last = await _last_finished(client, workflow_id)
    if last is not None and all(f.fingerprint() in last[1].handled for f in report.findings()):
        log.info("%s: stale report of %s: nothing started", node.name, report.finding.headline())
        return last[0]
    if last is not None:  # the new ladder carries what the node's ladders handled so far
        inp.handled_before = last[1].handled
    return await client.start_workflow(workflow, inp, **start)


async def start_admission(
    client: Client, inp: AdmissionInput, *, task_queue: str, workflow: Any = NODE_ADMISSION_WORKFLOW
) -> WorkflowHandle[Any, Any]:
    """One admission per node at a time; starting it again while it runs is a no-op."""
    return await client.start_workflow(
        workflow,
        inp,
        id=admission_workflow_id(inp.node.name),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"{inp.node.name}: admission ({inp.policy.passes} deep diagnoses)",
    )


def _orphaned_by(last: WorkflowExecutionDescription) -> bool:
    if last.status in NOBODY_FINISHED:
        return True
    outcome = last.typed_search_attributes.get(OUTCOME)
    return last.status is WorkflowExecutionStatus.COMPLETED and outcome in GAVE_IT_BACK


def _agent_left_it(cordoned_at: datetime | None, last: WorkflowExecutionDescription | None) -> bool:
    """The node's agent cordoned it and no ladder took the cordon up (its report never
    arrived): no ladder on record, or the last one closed before the cordon, by more than the
    clocks may disagree (the agent wrote the time on its node's clock)."""
    if cordoned_at is None:
        return False
    if last is None:
        return True
    closed = last.close_time
    return closed is not None and closed + SKEW_TOLERANCE < cordoned_at


def _replaced_since(last: WorkflowExecutionDescription, at: datetime) -> bool:
    outcome = last.typed_search_attributes.get(OUTCOME)
    closed = last.close_time
    return outcome == Outcome.REPLACED.value and closed is not None and closed >= at


async def _last_finished(
    client: Client, workflow_id: str
) -> tuple[WorkflowHandle[Any, Any], RemediationResult] | None:
    """The node's last ladder and its result, if it finished (completed)."""
    last = await described(client, workflow_id)
    if last is None or last.status is not WorkflowExecutionStatus.COMPLETED:
        return None
    handle = client.get_workflow_handle(
        workflow_id, run_id=last.run_id, result_type=RemediationResult
    )
    return handle, await handle.result()


class StartActivities:
    """The same starts, as activities: a workflow can signal another but not start it."""

    def __init__(self, client: Client, runbooks: RunbookSet, seal: bytes) -> None:
        self._client, self._runbooks, self._seal = client, runbooks, seal

    @act.START_REMEDIATION.defn
    async def start_remediation(self, start: RemediationStart) -> Started:
        handle = await start_remediation(
            self._client,
            start.node,
            start.report,
            node_task_queue=start.node_task_queue,
            task_queue=start.task_queue,
            seal=self._seal,
        )
        return Started(workflow_id=handle.id)

    @act.REMEDIATE_CONDITION.defn
    async def remediate_condition(self, start: ConditionStart) -> Started:
        """A problem condition no agent reported (agent dead, or another detector wrote it):
        the runbook is chosen here, from the controller's runbooks."""
        finding = finding_from_condition(start.node.name, start.condition)
        runbook = self._runbooks.match(finding) or DEFAULT_RUNBOOK
        handle = await start_remediation(
            self._client,
            NodeRef(name=start.node.name, pool=start.node.pool),
            FindingReport(finding=finding, runbook=runbook),
            node_task_queue=start.node_task_queue,
            task_queue=start.task_queue,
            seal=self._seal,
        )
        return Started(workflow_id=handle.id)

    @act.REMEDIATE_FINDING.defn
    async def remediate_finding(self, start: FindingStart) -> Started:
        """A finding the controller made (an agent gone silent, a blocklisted GPU in
        service), with the controller's runbook for it. ``after_running_ladder``: while the
        node's ladder runs, a retryable error (ask again later); when that ladder replaced the
        node after the finding, its GPUs are gone and nothing starts."""
        if start.after_running_ladder:
            last = await described(self._client, remediation_workflow_id(start.node.name))
            if last is not None and last.status is WorkflowExecutionStatus.RUNNING:
                raise TransientError(f"{start.node.name}: its ladder is still running")
            if last is not None and _replaced_since(last, start.finding.observed_at):
                return Started(workflow_id="")
        runbook = self._runbooks.match(start.finding) or DEFAULT_RUNBOOK
        handle = await start_remediation(
            self._client,
            start.node,
            FindingReport(finding=start.finding, runbook=runbook),
            node_task_queue=start.node_task_queue,
            task_queue=start.task_queue,
            seal=self._seal,
        )
        return Started(workflow_id=handle.id)

    @act.MATCH_RUNBOOK.defn
    async def match_runbook(self, finding: Finding) -> MatchedRunbook:
        return MatchedRunbook(runbook=self._runbooks.match(finding))

    @act.ADOPT_ORPHANS.defn
    async def adopt_orphaned_cordons(self, check: OrphanCheck) -> NodeNames:
        """remedy's cordon on a node with no ladder running is adopted only on evidence that
        nobody owns it: its last ladder failed, was terminated, timed out or was cancelled, or
        finished as recovered or cleared yet left the cordon (its restore failed), or an active
        check begun since failed or was terminated (it held the cordon), or the node's agent
        cordoned it after its last ladder closed (the report that would start one was lost). A
        ladder that ended needing a human, aborted or replaced left the node to a person or to
        its replacement; a node whose history is gone is left alone too. Each orphan gets a ladder
        that probes it and gives it back if healthy, or holds it for a person."""
        adopted = []
        for node in check.nodes:
            last = await described(self._client, remediation_workflow_id(node.name))
            orphaned = last is not None and _orphaned_by(last)
            orphaned |= _agent_left_it(check.agent_cordoned_at.get(node.name), last)
            if not orphaned and not await self._check_left_it(node.name, last):
                continue
            finding = orphaned_cordon(node.name, datetime.now(UTC))
            runbook = self._runbooks.match(finding) or DEFAULT_RUNBOOK
            await start_remediation(
                self._client,
                node,
                FindingReport(finding=finding, runbook=runbook),
                node_task_queue=check.node_task_queue or node_task_queue(node.name),
                task_queue=check.task_queue,
                seal=self._seal,
            )
            adopted.append(node.name)
        return NodeNames(nodes=adopted)

    async def _check_left_it(self, node: str, last: WorkflowExecutionDescription | None) -> bool:
        """The node's active check, begun after its last ladder ended, failed or was stopped
        with its cordon on: nobody owns the cordon (a check hands a node on only when it
        finishes)."""
        check = await described(self._client, active_check_workflow_id(node))
        if check is None or check.status not in NOBODY_FINISHED:
            return False
        ended = last.close_time if last is not None else None
        return ended is None or check.start_time > ended

    @act.START_ADMISSION.defn
    async def start_admission(self, inp: AdmissionInput) -> Started:
        if inp.failure_runbook is None:
            failed = Finding(
                node=inp.node.name,
                check="admission",
                reason=ADMISSION_FAILED,
                severity=Severity.CRITICAL,
                observed_at=datetime.now(UTC),
            )
            inp = inp.model_copy(update={"failure_runbook": self._runbooks.match(failed)})
        handle = await start_admission(self._client, inp, task_queue=activity.info().task_queue)
        return Started(workflow_id=handle.id)

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.start_remediation,
            self.remediate_condition,
            self.remediate_finding,
            self.match_runbook,
            self.adopt_orphaned_cordons,
            self.start_admission,
        ]
