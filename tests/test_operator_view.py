"""What an operator sees of a running ladder on the real dev server: the search attributes the
Web UI and `remedy status` filter on, the one-line summary, the current details, and the
status table with its filters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecution
from temporalio.testing import WorkflowEnvironment

from contract import search_attributes as sa
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import own_fleet, running_workers
from tests.ladder import report, state_of
from tests.test_cli import cli

WAITS = Runbook(
    name="reset-after-approval",
    match=Match(xids=[48]),
    cordon=True,
    watch=timedelta(0),  # a real-time server: look for the Xid once, no 10-minute watch
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)
T = TypeVar("T")


async def eventually(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool]) -> T:
    """Visibility is eventually consistent: poll a little."""
    for _ in range(100):
        value = await read()
        if ok(value):
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"never true; last: {value!r}")


async def listed(client: Client, query: str) -> list[WorkflowExecution]:
    return [w async for w in client.list_workflows(query)]


async def test_a_waiting_ladder_is_found_by_its_search_attributes_and_tells_its_story(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("ui", 2)
    node = sorted(fleet.nodes)[0]
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        finding = fleet.inject(node, "ecc_dbe", gpu=3)
        handle = await report(client, queues, finding, WAITS)
        await eventually(lambda: state_of(handle), lambda s: s.phase is Phase.AWAITING_APPROVAL)
        by_node = await eventually(
            lambda: listed(client, f"RemedyNode = '{node}' AND ExecutionStatus = 'Running'"),
            lambda ws: (
                len(ws) == 1 and ws[0].typed_search_attributes.get(sa.PHASE) == "awaiting_approval"
            ),
        )
        waiting = await listed(
            client,
            f"RemedyPool = '{queues.pool}' AND RemedyPhase = "
            "'awaiting_approval' AND ExecutionStatus = 'Running'",
        )
        by_serial = await listed(client, f"RemedyGpuSerials = '{finding.component.serial}'")
        # The summary belongs to the run that was started (continue-as-new cannot carry it).
        first_run = client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
        summary = await (await first_run.describe()).static_summary()
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        status_code, status_out = await cli(
            "status", "--address", address, "--pool", queues.pool, "--schedule", "none", "--json"
        )
        _, table = await cli(
            "status",
            "--address",
            address,
            "--pool",
            queues.pool,
            "--schedule",
            "none",
            "--awaiting-approval",
        )
        _, none_waiting = await cli(
            "status",
            "--address",
            address,
            "--pool",
            queues.pool,
            "--schedule",
            "none",
            "--state",
            "tolerating",
        )
        await cli("approve", node, "--address", address, "--by", "alice")
        result = await handle.result()
        closed = await eventually(
            lambda: listed(
                client,
                f"RemedyNode = '{node}' AND RemedyOutcome = 'recovered' AND "
                "ExecutionStatus = 'Completed'",
            ),
            lambda ws: len(ws) == 1,
        )

    attrs = by_node[0].typed_search_attributes
    assert by_node[0].id == handle.id
    assert attrs.get(sa.POOL) == queues.pool and attrs.get(sa.FAULT) == "Xid48"
    assert attrs.get(sa.RUNBOOK) == "reset-after-approval" and attrs.get(sa.RUNG) == "reset_gpu"
    assert attrs.get(sa.GPU_SERIALS) == [finding.component.serial]
    assert attrs.get(sa.PHASE_SINCE) is not None
    assert [w.id for w in waiting] == [handle.id]
    assert handle.id in [w.id for w in by_serial]
    assert summary == (
        f"{node}: Xid 48 on GPU 3 ({finding.component.serial}) → "
        "reset-after-approval (drain, reset_gpu), as it began"
    )
    details = metadata.current_details
    assert f"### {node}: Xid 48 on GPU 3" in details
    assert "**waiting for approval** of reset_gpu" in details
    assert f"`remedy approve {node}`" in details
    assert "- **rung 1 drain**: done at " in details  # the ladder so far

    assert status_code == 0
    [row] = json.loads(status_out)["nodes"]
    assert (row["node"], row["state"], row["fault"], row["rung"], row["awaiting_approval"]) == (
        node,
        "awaiting_approval",
        "Xid48",
        "reset_gpu",
        True,
    )
    assert node in table and "WAITING" in table and "1 waiting for approval" in table
    assert node not in none_waiting

    assert result.outcome is Outcome.RECOVERED
    done = closed[0].typed_search_attributes
    assert done.get(sa.PHASE) == "done" and done.get(sa.RUNG) == "reset_gpu"
