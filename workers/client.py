"""Connecting to Temporal, and starting or joining a node's remediation."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode

from activities.starts import start_remediation
from contract import search_attributes
from contract.names import CONTROLLER_TASK_QUEUE
from remedy.core.models import NodeRef
from remedy.ladder.remediation import FindingReport, RemediationResult
from workers.connection import (
    Connection,
    ConnectOptions,
    TemporalConfigError,
    failure,
    plain,
    resolve,
)
from workers.connection import TemporalUnreachable as TemporalUnreachable  # the old home
from workflows.node_remediation import NodeRemediation


async def connect(
    address: str, namespace: str = "default", runtime: Runtime | None = None
) -> Client:
    """Connect to a server remedy started itself (the demo's, the crash tests', a benchmark's):
    the address as given, no configuration read."""
    return await connect_to(plain(address, namespace), runtime)


async def connect_with(
    options: ConnectOptions, role: str, runtime: Runtime | None = None
) -> Client:
    """Connect as the `temporal` CLI does (profile file, TEMPORAL_* variables, ``options``
    over them; see workers/connection.py), as ``remedy-ROLE:USER@HOST``; payloads encrypted
    when REMEDY_CODEC_KEY_FILE names a key file (workers/codec.py)."""
    from workers.codec import CodecKeyError, data_converter_from_env

    try:
        converter = data_converter_from_env()
    except CodecKeyError as exc:  # a bad key file: one line, as any other configuration error
        raise TemporalConfigError("REMEDY_CODEC_KEY_FILE", str(exc)) from exc
    return await connect_to(resolve(options, role), runtime, converter)


async def connect_to(
    connection: Connection,
    runtime: Runtime | None = None,
    converter: DataConverter = pydantic_data_converter,
) -> Client:
    """Every failure is a TemporalConnectError naming what failed (address, TLS, credentials)."""
    try:
        return await Client.connect(
            connection.address,
            namespace=connection.namespace,
            api_key=connection.api_key,
            tls=connection.tls,
            rpc_metadata=connection.rpc_metadata,
            identity=connection.identity,
            runtime=runtime,
            data_converter=converter,
        )
    except (RuntimeError, ValueError, RPCError) as exc:  # the SDK's core: RuntimeError
        raise failure(exc, connection) from exc


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
