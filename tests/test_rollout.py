"""A rollout under Worker Versioning on the dev server, with real workers (workers/versioning.py,
docs/operations.md "Upgrading"): ladders started on version N finish on N (PINNED), ladders
started once N+1 is current run on N+1, and the pool's budget (AUTO_UPGRADE) moves to N+1, with
no workflow task failed on the way (no replay or nondeterminism failure)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import pytest
from temporalio.api.enums.v1 import EventType, VersioningBehavior
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import APPROVE
from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.ladder.remediation import Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.runbook.authored import Approval
from remedy.trust.decisions import ApproveRequest
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import report, state_of
from workers import versioning
from workers.binaries import installed_binary
from workers.controller import controller_worker
from workers.door import DoorSettings

# Waits for an approval, then a diagnose: a ladder that is still running when N+1 comes.
RUNBOOK = Runbook(
    name="diagnose-once-approved",
    match=Match(xids=[79]),
    ladder=[Rung(action=Action.DIAGNOSE, approval=Approval.REQUIRED)],
)
PATIENCE = 180.0  # seconds: a liveness bound, not a timing (4 rollout files at once took 110 s)
DEPLOYMENT = ("worker", "deployment", "--deployment-name", versioning.DEPLOYMENT)


async def _until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(int(PATIENCE * 10)):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {PATIENCE} s: {what}")


async def _make_current(client: Client, build_id: str) -> None:
    """Set ``build_id`` current once the server has seen its workers poll."""
    for _ in range(int(PATIENCE * 10)):
        try:
            await versioning.make_current(client, build_id)
            return
        except RPCError:  # the version is not known yet: no poll reached the server
            await asyncio.sleep(0.1)
    raise AssertionError(f"{build_id} never became current")


@asynccontextmanager
async def _version(
    client: Client, fleet: SimFleet, queues: Queues, build_id: str, mp: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """A second controller (its two workers) on the same queues, as version ``build_id``."""
    mp.setenv(versioning.BUILD_ID, build_id)
    with ThreadPoolExecutor(max_workers=4) as executor:
        door = DoorSettings(seal=queues.seal, agents_queue=queues.agents)
        workers = controller_worker(
            client, fleet.cluster, executor, queues.controller, None, queues.known, door=door
        )
        async with workers:
            yield


async def _cli(env: WorkflowEnvironment, *args: str) -> str:
    """``temporal ARGS`` against the test's server (its JSON output)."""
    address = env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        installed_binary("temporal"),
        *args,
        "--address",
        address,
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(out.decode())
    return out.decode()


async def _ran_on(handle: WorkflowHandle) -> tuple[set[str], int]:
    """The build ids of the workers that completed the run's workflow tasks (the handle's run:
    a ladder's continue-as-new, at the dev server's suggestion, starts on the current version),
    and how many of its workflow tasks failed."""
    history = await handle.fetch_history()
    builds = {
        e.workflow_task_completed_event_attributes.deployment_version.build_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    }
    failed = sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events)
    return builds, failed


async def _versioning(handle: WorkflowHandle) -> tuple[int, str]:
    """The run's versioning behavior and the version it is on, as the server says."""
    info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    return info.behavior, info.deployment_version.build_id


async def _set_current(env: WorkflowEnvironment, build_id: str) -> bool:
    """As docs/operations.md says it: the CLI, once the version's workers polled."""
    try:
        await _cli(env, *DEPLOYMENT, "set-current-version", "--build-id", build_id, "--yes")
    except RuntimeError:
        return False
    return True


async def _approval_waits(handle: WorkflowHandle) -> bool:
    return (await state_of(handle)).phase is Phase.AWAITING_APPROVAL


async def test_old_ladders_finish_on_n_new_ones_start_on_n1_and_the_budget_moves(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = dev_env.client
    run = uuid.uuid4().hex[:6]
    n, n1 = f"n-{run}", f"n1-{run}"
    fleet = own_fleet("rollout", nodes=3)
    old_node, new_node, _ = sorted(fleet.nodes)
    name = versioning.DEPLOYMENT
    monkeypatch.setenv(versioning.SWITCH, "on")
    monkeypatch.setenv(versioning.BUILD_ID, n)
    async with running_workers(client, fleet) as queues:  # version N and the agents
        await _make_current(client, n)
        old = await report(client, queues, fleet.inject(old_node, "gpu_lost", gpu=0), RUNBOOK)
        await _until("the ladder on N waits for its approval", lambda: _approval_waits(old))
        budget = client.get_workflow_handle(budget_workflow_id(queues.pool))
        first = client.get_workflow_handle(old.id, run_id=(await old.describe()).run_id)
        assert await _versioning(old) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, n)
        assert await _versioning(budget) == (VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, n)

        async with _version(client, fleet, queues, n1, monkeypatch):  # deploy N+1
            await _until("N+1 is current", lambda: _set_current(dev_env, n1))
            described = json.loads(await _cli(dev_env, *DEPLOYMENT[:2], "describe", "--name", name))
            assert described["routingConfig"]["currentVersionBuildID"] == n1
            drainage = {v["BuildID"]: v["drainageStatus"] for v in described["versionSummaries"]}
            assert drainage[n] == "draining"  # its pinned ladders still run: keep its pods

            async def still_on_n() -> bool:  # the query docs/operations.md gives for it
                query = f"TemporalWorkerDeploymentVersion = '{name}:{n}'"
                query += " AND ExecutionStatus = 'Running'"
                listed = await _cli(dev_env, "workflow", "list", "--query", query)
                return old.id in listed

            await _until("the ladder on N listed as running on N", still_on_n)
            new = await report(client, queues, fleet.inject(new_node, "gpu_lost", gpu=0), RUNBOOK)
            await _until("the ladder on N+1 waits for its approval", lambda: _approval_waits(new))
            for handle in (old, new):
                await APPROVE.send(handle, ApproveRequest(by="rollout"))
            await asyncio.wait_for(asyncio.gather(old.result(), new.result()), PATIENCE)

            async def budget_moved() -> bool:
                return (await _versioning(budget))[1] == n1

            await _until("the budget runs on N+1", budget_moved)
            assert await _ran_on(first) == ({n}, 0)  # pinned: every task on N, after N+1 came too
            assert await _ran_on(new) == ({n1}, 0)
            assert await _versioning(new) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, n1)
            builds, failed = await _ran_on(budget)
            assert builds == {n, n1} and failed == 0  # began on N, goes on on N+1, replayed
            moved = await _versioning(budget)
            assert moved == (VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, n1)


async def test_the_first_versioned_release_takes_over_the_unversioned_runs(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.12.0 to 0.13.0 (docs/operations.md): runs started on unversioned workers move to the
    first version made current and replay there (the budget, at its next task); a ladder the
    still-running unversioned worker holds finishes with no failed task either way."""
    client = dev_env.client
    first_version = f"v-{uuid.uuid4().hex[:6]}"
    fleet = own_fleet("unversioned", nodes=2)
    node = sorted(fleet.nodes)[0]
    monkeypatch.delenv(versioning.SWITCH, raising=False)
    async with running_workers(client, fleet) as queues:  # unversioned, and the agents
        ladder = await report(client, queues, fleet.inject(node, "gpu_lost", gpu=0), RUNBOOK)
        await _until("the unversioned ladder waits", lambda: _approval_waits(ladder))
        run = client.get_workflow_handle(ladder.id, run_id=(await ladder.describe()).run_id)
        budget = client.get_workflow_handle(budget_workflow_id(queues.pool))
        monkeypatch.setenv(versioning.SWITCH, "on")
        async with _version(client, fleet, queues, first_version, monkeypatch):
            await _until("it is current", lambda: _set_current(dev_env, first_version))
            await APPROVE.send(ladder, ApproveRequest(by="rollout"))
            await asyncio.wait_for(ladder.result(), PATIENCE)

            async def budget_moved() -> bool:
                return (await _versioning(budget))[1] == first_version

            await _until("the budget runs on the first version", budget_moved)
            # No failed task wherever it ran. Whether its last tasks ran on the first version
            # or on the unversioned worker that still runs and has it cached is the server's
            # to say (both seen, the latter under load): docs/operations.md has 0.12.0's pods
            # stopped once 0.13.0 is current, so that every run moves.
            builds, failed = await _ran_on(run)
            assert builds <= {"", first_version} and "" in builds and failed == 0
            assert await _ran_on(budget) == ({"", first_version}, 0)
