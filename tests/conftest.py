"""Shared fixtures: one real time-skipping Temporal server for the session, a fresh pair of task
queues per test, and the simulated fleet behind the real activities."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract import search_attributes
from contract.names import (
    admission_workflow_id,
    budget_workflow_id,
    hardware_record_workflow_id,
    remediation_workflow_id,
)
from kubeapi import ApiServer
from remedy.attribution.jobs import JobSide
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.hardware import BlocklistPolicy
from remedy.runbook import Runbook, RunbookSet, load_runbooks
from remedy.scan.cluster import Cluster
from remedy.trust.signing import Keyring
from tests.processes import Children, stop_tasks_since
from tests.servers import STARTUP, clock_sleep, started
from workers.binaries import installed_binary
from workers.client import ensure_search_attributes
from workers.controller import WorkerTuning, controller_worker, node_agent_worker
from workers.door import DoorSettings, new_seal

ROOT = Path(__file__).resolve().parent.parent
# The lanes (fast, server) and the guards against leftover processes, threads and tasks.
pytest_plugins = ["tests.suite"]
# The dev server (dev_env) suggests continue-as-new from this many events, not 4K: that path
# runs in seconds.
SUGGEST_CONTINUE_AS_NEW_AT = 40


@pytest.fixture
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping server per test (it starts in ~0.1 s): one test's leftover work
    (a closed workflow's activity still pending) stops that server's clock from skipping, and
    must not stall every later test. ``env.sleep`` moves its clock (tests/servers.py)."""
    env = await started(
        lambda: WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter,
            test_server_existing_path=installed_binary("temporal-test-server"),
            test_server_startup_timeout=STARTUP,
        )
    )
    before = asyncio.all_tasks()
    try:
        await ensure_search_attributes(env.client)
        env.sleep = functools.partial(clock_sleep, env)  # type: ignore[method-assign]
        yield env
        # Before the server goes: a worker left running could not shut down without it.
        if left := await stop_tasks_since(before):
            raise AssertionError(f"the test left tasks running (stopped now): {left}")
    finally:
        await env.shutdown()


def start_dev_server() -> Awaitable[WorkflowEnvironment]:
    """The real dev server (SQLite, full visibility), for what the time-skipping one lacks:
    schedule-to-start timeouts with no worker, continue-as-new suggestions, listing workflows.
    (tests/histories/record_continued.py records on the same.)"""
    return WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=installed_binary("temporal"),
        dev_server_startup_timeout=STARTUP,
        search_attributes=search_attributes.ALL,
        dev_server_extra_args=[
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={SUGGEST_CONTINUE_AS_NEW_AT}",
        ],
    )


@pytest.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await started(start_dev_server)
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def shipped_runbooks() -> RunbookSet:
    return _shipped()


def own_fleet(prefix: str, nodes: int) -> SimFleet:
    """A fleet in its own pool with its own node names: the dev server outlives the test."""
    return SimFleet(
        nodes=nodes,
        pool=f"pool-{uuid.uuid4().hex[:8]}",
        name_prefix=f"{prefix}-{uuid.uuid4().hex[:6]}",
    )


@pytest.fixture
def fleet() -> SimFleet:
    # Its own pool: a pool's DisruptionBudget workflow outlives the test on the shared server.
    return SimFleet(nodes=4, gpus_per_node=8, pool=f"pool-{uuid.uuid4().hex[:8]}")


@dataclass(frozen=True)
class Queues:
    controller: str
    agents: str
    pool: str
    # The controller's runbooks: a test adds (or replaces) those it reports, as an operator
    # gives the controller a runbook before an agent may ask for it (remedy.ladder.intake).
    known: TestRunbooks = field(default_factory=lambda: TestRunbooks([]))
    seal: bytes = field(default_factory=new_seal, repr=False)  # the controller's (workers/door.py)

    @property
    def pool_queue(self) -> tuple[str, str]:
        return self.pool, self.controller


class TestRunbooks(RunbookSet):
    """A runbook set a test adds to while the controller runs."""

    __test__ = False  # not a test class

    def add(self, *runbooks: Runbook) -> None:
        for runbook in runbooks:
            self._runbooks = [r for r in self._runbooks if r.name != runbook.name] + [runbook]
            self._by_name[runbook.name] = runbook


@functools.cache
def _shipped() -> RunbookSet:
    return RunbookSet(load_runbooks([ROOT / "runbooks"]))


@asynccontextmanager
async def running_workers(
    client: Client,
    fleet: SimFleet,
    agents: bool = True,
    cluster: Cluster | None = None,
    policy: BudgetPolicy | None = None,
    blocklist: BlocklistPolicy | None = None,
    runbooks: RunbookSet | None = None,
    jobs: JobSide | None = None,
    keyring: Keyring | Callable[[], Keyring] | None = None,
    tuning: WorkerTuning | None = None,
) -> AsyncIterator[Queues]:
    """The controller worker (with the shipped runbooks) and the simulated node agents, on
    queues unique to this test. ``cluster`` replaces the twin's cluster (e.g. the Kubernetes
    adapter on an emulator)."""
    name = f"test-{uuid.uuid4()}"
    pool = next(iter(fleet.nodes.values())).pool
    known = TestRunbooks(runbooks or _shipped())
    queues = Queues(controller=name, agents=f"{name}-agents", pool=pool, known=known)
    with ThreadPoolExecutor(max_workers=8) as executor:
        workers = [
            controller_worker(
                client,
                cluster or fleet.cluster,
                executor,
                queues.controller,
                policy,
                known,
                blocklist,
                jobs,
                keyring=keyring,
                tuning=tuning,
                door=DoorSettings(seal=queues.seal, agents_queue=queues.agents),
            )
        ]
        if agents:  # else: a fleet whose agents are dead
            workers.append(node_agent_worker(client, fleet.host, executor, queues.agents))
        async with AsyncExitStack() as running:
            for worker in workers:
                await running.enter_async_context(worker)
            try:
                yield queues
            finally:
                for held in fleet.holds.values():  # a worker waits for the activities it runs
                    held.release()
                await _end_leftovers(client, pool, fleet, queues.controller)


async def pool_known(
    client: Client, queues: Queues | str, policy: BudgetPolicy | None = None
) -> None:
    """Start the test pool's disruption budget on its controller's queue, as the controller does
    once a ladder in a pool asks for a share: `remedy trigger --pool` refuses a pool remedy does
    not know (workers/known_pools.py), and a test's own pool is new to the server."""
    from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_task_queue
    from remedy.disruption.budget import BudgetState

    # A pool alone: its budget waits on a queue no worker serves (the test ends it).
    pool, queue = (queues, f"nobody-{queues}") if isinstance(queues, str) else queues.pool_queue
    await client.start_workflow(
        DISRUPTION_BUDGET_WORKFLOW,
        BudgetState(pool=pool, policy=policy or BudgetPolicy()),
        id=budget_workflow_id(pool),
        task_queue=budget_task_queue(queue),
    )


async def _end_leftovers(client: Client, pool: str, fleet: SimFleet, queue: str) -> None:
    """The pool's budget, the GPUs' hardware records, any ladder or admission a test left
    waiting, and its job guards would outlive the test on the shared dev server."""
    with contextlib.suppress(RPCError):  # the time-skipping server has no visibility queries
        guards = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
        async for w in client.list_workflows(guards):
            with contextlib.suppress(RPCError):
                await client.get_workflow_handle(w.id).terminate("test over")
    # Ladders first: one still running could signal-with-start a budget or record again.
    ids = [
        *(
            f(n)
            for n in sorted(fleet.nodes)
            for f in (admission_workflow_id, remediation_workflow_id)
        ),
        budget_workflow_id(pool),
        *(hardware_record_workflow_id(s) for s in fleet.serials),
    ]
    for workflow_id in ids:
        try:
            await client.get_workflow_handle(workflow_id).terminate("test over")
        except RPCError:
            pass  # never started, or already closed


@pytest.fixture
def processes() -> Iterator[Children]:
    """Start a test's processes here: each in a group of its own, all stopped when it ends."""
    with Children() as children:
        yield children


@pytest.fixture
def api() -> Iterator[ApiServer]:
    """The strict Kubernetes API emulator (kubeapi), fresh per test. Whatever remedy sent that
    the API server's schema does not know fails the test: a real server would drop it."""
    with ApiServer() as server:
        yield server
        assert server.crashes == [], f"the API emulator failed: {server.crashes}"
        assert server.warnings == [], (
            f"remedy sent fields Kubernetes does not know: {server.warnings}"
        )
