"""The controller's side of the active checks: which due nodes are idle or held by a workflow,
the GpuActiveCheck condition, and handing a failed check's findings to the node's ladder (the
runbook matched here, as the agent matches its probe's findings)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus

from activities.errors import temporal_errors
from activities.starts import described, start_remediation
from contract import activities as act
from contract.names import (
    active_check_workflow_id,
    admission_workflow_id,
    remediation_workflow_id,
)
from remedy.core.errors import NodeGone
from remedy.core.models import Finding, Severity, Started
from remedy.detection.conditions import GPU_ACTIVE_CHECK
from remedy.detection.probe.runner import PROBE, UNAVAILABLE
from remedy.ladder.remediation import FindingReport
from remedy.runbook import DEFAULT_RUNBOOK, RunbookSet
from remedy.scan.active_checks import (
    ActiveCheckPublish,
    CheckFailure,
    NodeWorkload,
    Workloads,
    active_check_condition,
)
from remedy.scan.cluster import GpuWorkload, NodeMarks
from remedy.scan.fleet import NodeNames

log = logging.getLogger(__name__)
HOLDERS = (remediation_workflow_id, admission_workflow_id, active_check_workflow_id)
AT_ONCE = 16  # nodes looked at concurrently: a large pool within the time, the API spared


class ActiveCheckActivities:
    def __init__(
        self,
        client: Client,
        marks: NodeMarks,
        workload: GpuWorkload | None,
        runbooks: RunbookSet,
        seal: bytes,
    ) -> None:
        self._client, self._marks, self._workload = client, marks, workload
        self._runbooks, self._seal = runbooks, seal  # its findings are the controller's own

    @act.NODE_WORKLOADS.defn
    async def node_workloads(self, names: NodeNames) -> Workloads:
        """Per node: a running workflow that owns it (its ladder, admission or a check still
        going from the last round), and how many GPU pods it runs (unknown: busy). Heartbeats
        as nodes are done: a large pool takes longer than one call's timeout."""
        gate = asyncio.Semaphore(AT_ONCE)
        done = 0

        async def one(node: str) -> NodeWorkload:
            nonlocal done
            async with gate:
                load = await self._workload_of(node)
            done += 1
            activity.heartbeat(done)
            return load

        loads = await asyncio.gather(*(one(node) for node in names.nodes))
        return Workloads(nodes=dict(zip(names.nodes, loads, strict=True)))

    async def _workload_of(self, node: str) -> NodeWorkload:
        # Pods counted even while held: a check re-reads its own node after its cordon.
        held = await self._held_by(node)
        try:
            pods = await asyncio.to_thread(self._gpu_pods, node)
        except NodeGone:
            held, pods = "gone from the cluster", None
        return NodeWorkload(gpu_pods=pods, held_by=held)

    async def _held_by(self, node: str) -> str:
        for workflow_id in (f(node) for f in HOLDERS):
            last = await described(self._client, workflow_id)
            if last is not None and last.status is WorkflowExecutionStatus.RUNNING:
                return workflow_id
        return ""

    def _gpu_pods(self, node: str) -> int | None:
        if self._workload is None:
            return None
        with temporal_errors():
            return len(self._workload.gpu_pods(node))

    @act.PUBLISH_ACTIVE_CHECK.defn
    def publish_active_check(self, update: ActiveCheckPublish) -> None:
        node = update.node.name
        with temporal_errors():
            previous = next(
                (c for c in self._marks.conditions(node) if c.type == GPU_ACTIVE_CHECK), None
            )
            condition = active_check_condition(update.report, previous, datetime.now(UTC))
            if condition is not previous:  # a node already seen is not marked again
                self._marks.set_conditions(node, [condition])

    @act.REPORT_CHECK_FAILURE.defn
    async def report_check_failure(self, failure: CheckFailure) -> Started:
        """Every unhealthy finding of the check, each with the runbook it matches, to the
        node's ladder (signal-with-start: the first starts it, the rest join it)."""
        report = failure.report
        bad = [f for f in report.findings if f.unhealthy] or [_no_finding(report.node)]
        workflow_id = ""
        for finding in bad:
            runbook = self._runbooks.match(finding) or DEFAULT_RUNBOOK
            handle = await start_remediation(
                self._client,
                failure.node,
                FindingReport(finding=finding, runbook=runbook),
                node_task_queue=failure.node_task_queue,
                task_queue=failure.task_queue,
                seal=self._seal,
            )
            workflow_id = handle.id
            log.info(
                "%s: active check found %s → %s", report.node, finding.headline(), runbook.name
            )
        return Started(workflow_id=workflow_id)

    def all(self) -> list[Callable[..., Any]]:
        return [self.node_workloads, self.publish_active_check, self.report_check_failure]


def _no_finding(node: str) -> Finding:
    """A report that is unhealthy with no finding ran no check: fail closed."""
    return Finding(
        node=node,
        check=PROBE.check,
        reason=UNAVAILABLE,
        severity=Severity.CRITICAL,
        evidence="the active check's deep diagnose ran no check",
        observed_at=datetime.now(UTC),
    )
