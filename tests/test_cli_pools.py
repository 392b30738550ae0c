"""A pool name remedy does not know is a typo: `trigger` and `status` refuse it (exit 1, the
known pools listed) and nothing is created — no budget, no ladder, no cordon."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from contract.names import budget_workflow_id, remediation_workflow_id
from tests.conftest import own_fleet, pool_known, running_workers
from workers.cli import app


async def cli(*args: str) -> tuple[int, str]:
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.output


async def exists(client: Client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        assert err.status is RPCStatusCode.NOT_FOUND, err
        return False
    return True


async def test_an_unknown_pool_is_refused_and_nothing_is_started(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("pools", 1)
    [node] = sorted(fleet.nodes)
    bogus = f"bogus-{uuid.uuid4().hex[:6]}"
    async with running_workers(client, fleet) as queues:
        await pool_known(client, queues)
        where = ("--address", address, "--task-queue", queues.controller)
        triggered = await cli(
            "trigger", node, "--runbook", "gpu-memory-ecc", "--pool", bogus,
            *where, "--node-task-queue", queues.agents,
        )  # fmt: skip
        status = await cli("status", "--pool", bogus, "--address", address)
        blocking = await cli("status", "--blocking", "--pool", bogus, "--address", address)
        budget = await exists(client, budget_workflow_id(bogus))
        ladder = await exists(client, remediation_workflow_id(node))
    code, said = triggered
    assert code == 1, said
    [line] = said.splitlines()
    assert line.startswith(f"error: --pool: no pool {bogus!r} (known pools: "), line
    assert "default" in line and queues.pool in line  # the budgets that run are listed
    assert not budget and not ladder and not fleet.node(node).unschedulable
    for code, said in (status, blocking):
        assert code == 1, said
        assert said.startswith(f"error: --pool: no pool {bogus!r} (known pools: "), said


async def test_a_pool_the_latest_scan_or_a_budget_knows_is_taken(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("pools", 1)
    async with running_workers(client, fleet) as queues:
        before = await cli("status", "--blocking", "--pool", queues.pool, "--address", address)
        await pool_known(client, queues)
        after = await cli("status", "--blocking", "--pool", queues.pool, "--address", address)
    assert before[0] == 1, before  # no budget, no scan, no ladder: not a pool remedy knows
    assert after[0] == 0, after
