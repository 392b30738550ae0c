"""Connecting to Temporal, and starting or joining a node's remediation."""

from __future__ import annotations

import re
from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode

from activities.starts import start_remediation
from contract import search_attributes
from contract.names import CONTROLLER_TASK_QUEUE
from remedy.models import NodeRef
from remedy.remediation import FindingReport, RemediationResult
from workflows.node_remediation import NodeRemediation


class TemporalUnreachable(RuntimeError):
    """No Temporal server answered at the address (refused, unknown host, a malformed address,
    something else listening). A RuntimeError, as the SDK's own connect failure is."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"cannot reach Temporal at {address}: {reason}")
        self.address = address


async def connect(
    address: str, namespace: str = "default", runtime: Runtime | None = None
) -> Client:
    try:
        return await Client.connect(
            address, namespace=namespace, runtime=runtime, data_converter=pydantic_data_converter
        )
    except (RuntimeError, ValueError, RPCError) as exc:  # the SDK's core: RuntimeError
        raise TemporalUnreachable(address, _reason(exc)) from exc


_DETAIL = re.compile(r'(?:message|error): "([^"]+)"')


def _reason(exc: Exception) -> str:
    """The words that matter in the core's error ("Connection refused", "failed to lookup
    address information: ..."), on one line."""
    text = " ".join(str(exc).split()).removeprefix("Failed client connect: ")
    details = _DETAIL.findall(text)
    return details[-1] if details else text or type(exc).__name__


def metrics_runtime(bind: str, role: str) -> Runtime:
    """A runtime that serves Prometheus metrics on ``bind`` (host:port, path /metrics): the
    SDK's own (workflow and activity latencies, task slots, polls) and remedy's, which
    workflows record through the workflow metric meter and the agent through the runtime's."""
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(
                bind_address=bind, counters_total_suffix=True, durations_as_seconds=True
            ),
            global_tags={"remedy_role": role},
        )
    )


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
        client,
        node,
        report,
        node_task_queue=node_task_queue,
        task_queue=task_queue,
        node_pickup_timeout=node_pickup_timeout,
        workflow=NodeRemediation.run,
    )
    return handle


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register remedy's search attributes that the namespace lacks; returns the added names.
    A workflow that sets an unknown one fails its task, so the controller does this before it
    takes work (and a server where it may not fails the controller's start, loudly)."""
    namespace = client.namespace
    try:
        known = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        have = {**known.system_attributes, **known.custom_attributes}
    except RPCError as err:  # the time-skipping test server can add but not list them
        if err.status is not RPCStatusCode.UNIMPLEMENTED:
            raise
        have = {}
    missing = {
        key.name: IndexedValueType.ValueType(key.indexed_value_type.value)
        for key in search_attributes.ALL
        if key.name not in have
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
