"""Shared fixtures: one real time-skipping Temporal server for the session, a fresh pair of task
queues per test, and the simulated fleet behind the real activities."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from remedy.budget import BudgetPolicy
from remedy.cluster import Cluster
from remedy.names import budget_workflow_id
from remedy.runbook import RunbookSet, load_runbooks
from remedy.sim import SimFleet
from workers.binaries import installed_binary
from workers.controller import controller_worker, node_agent_worker

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=installed_binary("temporal-test-server"),
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server (SQLite, full visibility), for what the time-skipping one lacks:
    schedule-to-start timeouts with no worker, continue-as-new suggestions, listing workflows."""
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=installed_binary("temporal"),
        # Suggest continue-as-new early so that path runs in seconds, not after 4k events.
        dev_server_extra_args=["--dynamic-config-value",
                               "limit.historyCount.suggestContinueAsNew=40"],
    )
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def shipped_runbooks() -> RunbookSet:
    return RunbookSet(load_runbooks([ROOT / "runbooks"]))


@pytest.fixture
def fleet() -> SimFleet:
    # Its own pool: a pool's DisruptionBudget workflow outlives the test on the shared server.
    return SimFleet(nodes=4, gpus_per_node=8, pool=f"pool-{uuid.uuid4().hex[:8]}")


@dataclass(frozen=True)
class Queues:
    controller: str
    agents: str
    pool: str


@asynccontextmanager
async def running_workers(client: Client, fleet: SimFleet, agents: bool = True,
                          cluster: Cluster | None = None,
                          policy: BudgetPolicy | None = None) -> AsyncIterator[Queues]:
    """The controller worker and the simulated node agents, on queues unique to this test.
    ``cluster`` replaces the twin's cluster (e.g. the Kubernetes adapter on an emulator)."""
    name = f"test-{uuid.uuid4()}"
    pool = next(iter(fleet.nodes.values())).pool
    queues = Queues(controller=name, agents=f"{name}-agents", pool=pool)
    with ThreadPoolExecutor(max_workers=8) as executor:
        controller = controller_worker(client, cluster or fleet.cluster, executor,
                                       queues.controller, policy)
        try:
            if not agents:  # a fleet whose agents are dead
                async with controller:
                    yield queues
                return
            async with controller, node_agent_worker(client, fleet.host, executor,
                                                     queues.agents):
                yield queues
        finally:
            await _end_budget(client, pool)


async def _end_budget(client: Client, pool: str) -> None:
    """The pool's budget workflow outlives the test; its timers must not fire on the shared
    server once this test's worker is gone (the time-skipping server would wait on them)."""
    try:
        await client.get_workflow_handle(budget_workflow_id(pool)).terminate("test over")
    except RPCError:
        pass  # never started, or already closed
