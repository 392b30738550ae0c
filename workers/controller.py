"""The controller worker: the fleet-level workflows and the cluster-side activities."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.active_checks import ActiveCheckActivities
from activities.budget import BudgetActivities
from activities.budget_signals import BudgetSignalActivities
from activities.cluster import cluster_activities
from activities.fleet import FleetActivities
from activities.hardware import HardwareActivities
from activities.intake import IntakeActivities
from activities.job_watch import JobWatchActivities
from activities.jobs import JobActivities
from activities.keyring import KeyringActivities
from activities.node import NodeActivities
from activities.starts import StartActivities
from contract.names import CONTROLLER_TASK_QUEUE, budget_task_queue
from remedy.attribution.jobs import JobSide
from remedy.attribution.rules import Attributor
from remedy.detection.host import NodeHost
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.hardware import BlocklistPolicy
from remedy.redaction import Redactor
from remedy.runbook import RunbookSet
from remedy.scan.cluster import Cluster
from remedy.trust.signing import Keyring
from workers.door import DoorSettings, keyring_source
from workers.stall_watch import WorkerStalled, until_stalled
from workers.versioning import behaving, deployment_config
from workflows.active_check import ActiveCheck
from workflows.active_checks import ActiveChecks
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan
from workflows.gpu_release import GpuRelease
from workflows.hardware_record import HardwareRecord
from workflows.hold_release import HoldRelease
from workflows.job_guard import JobGuard
from workflows.node_admission import NodeAdmission
from workflows.node_remediation import NodeRemediation

log = logging.getLogger(__name__)
SHUTDOWN_LIMIT = 30.0  # seconds a stalled controller's workers get to stop before it exits

WORKFLOWS = [
    NodeRemediation,
    DisruptionBudget,
    HardwareRecord,
    NodeAdmission,
    FleetScan,
    JobGuard,
    ActiveChecks,
    ActiveCheck,
    GpuRelease,
    HoldRelease,
]
# No sandbox in the controller. A sandbox re-imports a workflow's modules for every run it
# starts and keeps that copy while the run is cached (about 0.3 MB a ladder); passed through it,
# remedy's modules are shared by every run, and then its checks (a clock, random, I/O) reach
# none of remedy's code: code runs with the modules it imported, outside. What was left of it
# was its cost, about 4 ms of the controller's CPU a ladder (a burst of 375 ladders: 6.0-6.3 s
# against 4.1-4.7 s, bench/results/cordon_ratio.md). The checks are kept where they can see:
# the import contract in pyproject.toml keeps I/O modules out of workflows/, and
# tests/test_replay.py replays the recorded histories under STRICT_WORKFLOW_RUNNER, which
# re-imports every workflow module and checks its calls (passing cryptography through: an
# operator's signature, checked in a validator, imports its exceptions as it raises them).
WORKFLOW_RUNNER = UnsandboxedWorkflowRunner()
STRICT_WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "remedy", "contract", "workflows.common", "workflows.metrics", "cryptography"
    )
)


@dataclass(frozen=True)
class WorkerTuning:
    """How much of the fleet the controller keeps in memory. Every cached run holds its
    workflow's state and the SDK's for it (about 0.2 MB), so RSS grows with
    ``max_cached_workflows``, not with the nodes in remediation; a ladder evicted from the cache
    is replayed from its history when its next signal, timer or query comes. 500, not the
    SDK's 1,000: a smaller cache saves memory and costs bursts (runs evicted and replayed, the
    pool's budget among them), so `remedy controller --workflow-cache 250` suits a fleet whose
    ladders mostly wait (the sizes measured: docs/benchmarks.md, "Controller memory")."""

    max_cached_workflows: int = 500
    # How long a task waits on this worker's sticky queue before any worker may take it.
    sticky_queue_timeout: timedelta = timedelta(seconds=10)
    workflow_pollers: int = 5
    # Workflow tasks this worker holds at once: the SDK's 100. A task running local activities
    # (a ladder's first steps, a lease's request and release) holds its slot until they end:
    # ladders waiting on their leases queue for slots, and a lease added 4.3-9.5 s to a
    # ladder's p50 in 1,000-node mixed runs, none with 200. But with 200 or 400 (cache 500)
    # the worker stopped polling for good while 10,000 ladders started; 100 never has
    # (bench/results/lease_priority.md, "The ladders' slots, again"); `run` watches for a
    # stall and ends with WorkerStalled (workers/stall_watch.py).
    max_concurrent_workflow_tasks: int = 100
    # The pools' budgets, on their own worker (ControllerWorkers): one run per pool.
    budgets_cached: int = 100


class ControllerWorkers:
    """The controller's two workers in one process: the ladders and the fleet's workflows on
    its task queue, the pools' budgets on theirs (contract.names.budget_task_queue), each with
    its own pollers, slots and cache. On one worker a burst of ladders could hold every
    workflow-task slot, each running its lease request, a local activity that waits for the
    budget's answer, while the budget's own task waited for a slot: little or nothing moved
    until tasks and requests timed out (tests/test_budget_own_worker.py; docs/benchmarks.md,
    "Leases")."""

    def __init__(self, ladders: Worker, budgets: Worker) -> None:
        self.ladders, self.budgets = ladders, budgets
        self._running = AsyncExitStack()

    async def run(self, stall_after: timedelta | None = None) -> None:
        """Both, until this is cancelled or either fails (its error raised here); with
        ``stall_after``, until either has stopped taking its tasks for that long too
        (workers.stall_watch): WorkerStalled, once the workers were given
        ``SHUTDOWN_LIMIT`` to stop (a stalled worker may never finish its shutdown)."""
        await self.__aenter__()
        try:  # a worker that fails cancels this task; its error comes from __aexit__
            stalled = await self._until_stalled(stall_after)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        log.error("%s; shutting the workers down", stalled)
        try:
            await asyncio.wait_for(self.__aexit__(None, None, None), SHUTDOWN_LIMIT)
        except TimeoutError:
            log.error("the workers did not stop within %s s", SHUTDOWN_LIMIT)
        raise stalled

    async def _until_stalled(self, after: timedelta | None) -> WorkerStalled:
        while after is None:  # not watched: until cancelled
            await asyncio.Event().wait()
        return await until_stalled([self.ladders, self.budgets], after)

    async def __aenter__(self) -> ControllerWorkers:
        # The budgets first, so that they stop last: a ladder's task that asks for its lease
        # ends only once its budget answers, and the ladders' worker waits for its tasks.
        async with AsyncExitStack() as running:
            for worker in (self.budgets, self.ladders):
                await running.enter_async_context(worker)
            self._running = running.pop_all()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._running.__aexit__(*exc)  # a worker's fatal error is raised from here


def controller_worker(
    client: Client,
    cluster: Cluster,
    executor: ThreadPoolExecutor,
    task_queue: str = CONTROLLER_TASK_QUEUE,
    policy: BudgetPolicy | None = None,
    runbooks: RunbookSet | None = None,
    blocklist: BlocklistPolicy | None = None,
    jobs: JobSide | None = None,
    attributor: Attributor | None = None,
    redactor: Redactor | None = None,
    keyring: Keyring | Callable[[], Keyring] | None = None,
    tuning: WorkerTuning | None = None,
    workflows: Sequence[type] = WORKFLOWS,
    door: DoorSettings | None = None,
) -> ControllerWorkers:
    """The fleet-level workflows and the controller's activities on ``task_queue``
    (``workflows``: a benchmark's variant of one, under its name), and the pools' budgets on
    theirs. The ladders' worker runs budgets too: those started on its queue before their own."""
    tuning = tuning or WorkerTuning()
    activities = controller_activities(
        client,
        cluster,
        policy=policy,
        runbooks=runbooks,
        blocklist=blocklist,
        jobs=jobs,
        attributor=attributor,
        redactor=redactor,
        keyring=keyring,
        door=door,
    )
    versions = deployment_config()  # workers/versioning.py: None (unversioned) unless switched on
    ladders = Worker(
        client,
        task_queue=task_queue,
        workflows=behaving(workflows, versions),
        activities=activities,
        workflow_runner=WORKFLOW_RUNNER,
        activity_executor=executor,
        max_cached_workflows=tuning.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=tuning.sticky_queue_timeout,
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(tuning.workflow_pollers),
        max_concurrent_workflow_tasks=tuning.max_concurrent_workflow_tasks,
        deployment_config=versions,
    )
    budgets = Worker(
        client,
        task_queue=budget_task_queue(task_queue),
        workflows=behaving([DisruptionBudget], versions),
        activities=activities,  # the budget's own: deliver grants, publish the breaker, ...
        workflow_runner=WORKFLOW_RUNNER,
        activity_executor=executor,
        max_cached_workflows=tuning.budgets_cached,
        sticky_queue_schedule_to_start_timeout=tuning.sticky_queue_timeout,
        deployment_config=versions,
    )
    return ControllerWorkers(ladders, budgets)


def controller_activities(
    client: Client,
    cluster: Cluster,
    *,
    policy: BudgetPolicy | None = None,
    runbooks: RunbookSet | None = None,
    blocklist: BlocklistPolicy | None = None,
    jobs: JobSide | None = None,
    attributor: Attributor | None = None,
    redactor: Redactor | None = None,
    keyring: Keyring | Callable[[], Keyring] | None = None,
    door: DoorSettings | None = None,
) -> list[Callable[..., Any]]:
    """``runbooks`` choose the ladder for what the controller starts itself (a problem
    condition no agent reported, a node that failed admission, a node a job guard blamed);
    agents bring their own. ``jobs``: the cluster's guarded jobs (no job guards without), judged
    by ``attributor`` (default: the shipped attribution rules). ``redactor`` hides secrets in
    what pods and nodes wrote (log tails, condition messages) before a workflow gets it
    (default: remedy's default rules). ``keyring``: the operators whose signed decisions
    ladders take (none: decisions are recorded unverified), or how to read it anew (a file, so
    that a key removed stops counting). ``door``: how reports are checked (workers/door.py;
    default: each node's agent on its own queue, a seal of this process's own)."""
    door = door or DoorSettings()
    runbooks = runbooks if runbooks is not None else RunbookSet([])
    keys = keyring_source(keyring)
    return [
        *cluster_activities(cluster),
        *IntakeActivities(door.door(runbooks, keys()), cluster.marks, keys).all(),
        *BudgetActivities(
            client, cluster.fleet.pool_size, policy or BudgetPolicy(), cluster.fleet
        ).all(),
        *BudgetSignalActivities(client).all(),
        *HardwareActivities(client, blocklist or BlocklistPolicy()).all(),
        *KeyringActivities(keys).all(),
        *StartActivities(client, runbooks, door.seal).all(),
        *FleetActivities(client, cluster.fleet, redactor).all(),
        *ActiveCheckActivities(client, cluster.marks, cluster.workload, runbooks, door.seal).all(),
        *(JobActivities(client, jobs, runbooks, attributor, door.seal).all() if jobs else []),
        *(JobWatchActivities(client, jobs, runbooks, redactor).all() if jobs else []),
    ]


def node_agent_worker(
    client: Client,
    host_for: Callable[[str], NodeHost],
    executor: ThreadPoolExecutor,
    task_queue: str,
    redactor: Redactor | None = None,
    keyring: Keyring | None = None,
) -> Worker:
    """The host-local activities on a node queue (the real agent, or every simulated node)."""
    return Worker(
        client,
        task_queue=task_queue,
        activities=node_activities(host_for, redactor),
        activity_executor=executor,
    )


def node_activities(
    host_for: Callable[[str], NodeHost], redactor: Redactor | None = None
) -> list[Callable[..., Any]]:
    return NodeActivities(host_for, redactor).all()
