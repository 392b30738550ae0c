"""Connecting to Temporal, and starting or joining a node's remediation."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from activities.starts import start_remediation
from remedy.models import NodeRef
from remedy.names import CONTROLLER_TASK_QUEUE
from remedy.remediation import FindingReport, RemediationResult
from workflows.node_remediation import NodeRemediation


async def connect(address: str, namespace: str = "default") -> Client:
    return await Client.connect(address, namespace=namespace,
                                data_converter=pydantic_data_converter)


async def report_finding(
    client: Client,
    node: NodeRef,
    report: FindingReport,
    *,
    node_task_queue: str,
    task_queue: str = CONTROLLER_TASK_QUEUE,
    node_pickup_timeout: timedelta | None = None,
) -> WorkflowHandle[NodeRemediation, RemediationResult]:
    """Signal-with-start: a second report for the same node joins the running ladder."""
    handle: WorkflowHandle[NodeRemediation, RemediationResult] = await start_remediation(
        client, node, report, node_task_queue=node_task_queue, task_queue=task_queue,
        node_pickup_timeout=node_pickup_timeout, workflow=NodeRemediation.run)
    return handle
