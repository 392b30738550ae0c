"""The world the ladder's state machine (tests/ladder_model.py) runs in: a fresh time-skipping
server, the controller and agent workers and a simulated pool of three nodes per interleaving;
each step bounded in real time; stops sent as signals and waited for; what it counts."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    DescribeWorkflowExecutionResponse,
)
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import ABORT
from contract.names import remediation_workflow_id
from remedy.core.actions import ACTIONS
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import (
    FindingReport,
    Outcome,
    RemediationResult,
)
from tests.conftest import running_workers
from tests.servers import STARTUP, clock_sleep, started
from workers.binaries import installed_binary
from workers.client import ensure_search_attributes
from workflows.node_remediation import NodeRemediation

NODES = 3
DISRUPTIVE = {a.value for a, spec in ACTIONS.items() if spec.disruptive}
FAULTS = ["ecc_dbe", "gpu_lost", "app_xid", "thermal_transient", "remap_failure", "mcu_halt"]
LEFT_TO_A_PERSON = (Outcome.NEEDS_HUMAN, Outcome.ABORTED, Outcome.REPLACED, Outcome.NODE_GONE)
STEP_LIMIT_S = 180  # real seconds one step may take, on a busy machine
STOP_WITHIN = 40  # polls 5 server-seconds apart: an abort ends the ladder within these
SETTLE_S = 0.3  # real seconds before a stop, for the server's bug (LadderModel.settle)
STOP_WAIT_S = 90  # real seconds for them (server time stands while an activity runs)
STEPS = [timedelta(seconds=5), timedelta(minutes=1), timedelta(minutes=10), timedelta(hours=1)]
TIME_PIECE = timedelta(minutes=10)  # server time one bounded piece of a time step sleeps


@dataclass
class Ladder:
    """What the test sent to one run of a node's ladder."""

    run_id: str
    reports: list[FindingReport] = field(default_factory=list)
    aborted_at: int | None = None  # len(fleet.actions) when an abort was accepted
    closed_at: int | None = None  # len(fleet.actions) when it closed after that abort
    checked: bool = False  # its end was checked


@dataclass
class Counts:
    """Across every example of a run (printed by ``make chaos``)."""

    examples: int = 0
    steps: int = 0
    reports: int = 0
    ladders: int = 0
    aborts: int = 0
    budget_checks: int = 0
    discarded: int = 0  # examples the time-skipping server's cancel bug made unjudgeable
    failures: list[str] = field(default_factory=list)  # each with the steps before it
    escalations: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


COUNTS = Counts()


class ModelFleet(RuleBasedStateMachine):
    """The fleet under the model: its own time-skipping server, workers and simulated fleet
    per interleaving, a bounded loop to run each step on, and how to read a node's ladder."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.stack = AsyncExitStack()
        suffix = uuid.uuid4().hex[:6]
        self.fleet = SimFleet(nodes=NODES, pool=f"pool-{suffix}", name_prefix=f"m-{suffix}")
        self.names = sorted(self.fleet.nodes)
        self.ladders: dict[str, list[Ladder]] = {n: [] for n in self.names}
        self.trace: list[str] = []  # the rules as they ran (hypothesis cannot replay them)
        # One lease in the pool of three; its dead-holder sweep rarely (each sweep's timer is a
        # workflow task for every hour of server time the model skips).
        self.policy = BudgetPolicy(
            max_disruption="1", storm_share=1.0, reclaim_every=timedelta(hours=6)
        )
        self.set_aside = False  # the server's bug struck: the rest of the steps do nothing
        COUNTS.examples += 1
        self.start()

    def run(self, coro: Any, step: str = "") -> Any:
        """One step's work on the machine's loop, bounded: a step that hangs is a failure that
        names itself, not a stuck suite. None, doing nothing, once the example is set aside."""
        if self.set_aside:
            coro.close()
            return None
        if step:
            self.trace.append(step)
        with self.recorded():
            return self.loop.run_until_complete(asyncio.wait_for(coro, timeout=STEP_LIMIT_S))

    @contextlib.contextmanager
    def recorded(self) -> Iterator[None]:
        """A failure is kept with the steps that led to it: hypothesis replays a failing
        example to report it, and real workflows need not fail the same way twice."""
        try:
            yield
        except Exception as err:
            COUNTS.failures.append(f"{type(err).__name__}: {err}\nsteps: {self.trace}")
            raise

    def start(self) -> None:
        """A fresh time-skipping server and workers per interleaving (started in __init__:
        hypothesis runs initialize rules in any order)."""

        async def up() -> None:
            env = await started(
                lambda: WorkflowEnvironment.start_time_skipping(
                    data_converter=pydantic_data_converter,
                    test_server_existing_path=installed_binary("temporal-test-server"),
                    test_server_startup_timeout=STARTUP,
                )
            )
            self.stack.push_async_callback(env.shutdown)
            await ensure_search_attributes(env.client)
            self.env = env
            self.queues = await self.stack.enter_async_context(
                running_workers(env.client, self.fleet, policy=self.policy)
            )

        self.run(up())

    def teardown(self) -> None:
        for held in self.fleet.holds.values():
            held.release()
        try:
            if hasattr(self, "env"):  # also when set aside: its server and workers stop too
                with self.recorded():
                    closing = asyncio.wait_for(self.stack.aclose(), timeout=120)
                    self.loop.run_until_complete(closing)
        finally:
            self.loop.close()

    # -- helpers -----------------------------------------------------------------------------
    def handle(self, node: str) -> WorkflowHandle[NodeRemediation, RemediationResult]:
        return self.env.client.get_workflow_handle_for(
            NodeRemediation.run, remediation_workflow_id(node)
        )

    async def latest(self, node: str) -> tuple[WorkflowExecutionStatus | None, str]:
        """The status and run id of the node's latest ladder, read raw: the time-skipping
        server's datetime search attributes do not decode (describe() raises TypeError)."""
        request = DescribeWorkflowExecutionRequest(
            namespace=self.env.client.namespace,
            execution=WorkflowExecution(workflow_id=remediation_workflow_id(node)),
        )
        try:
            answer = await self.env.client.workflow_service.describe_workflow_execution(request)
        except RPCError:
            return None, ""
        info = answer.workflow_execution_info
        return WorkflowExecutionStatus(info.status), info.execution.run_id

    async def describe_raw(self, node: str) -> DescribeWorkflowExecutionResponse:
        request = DescribeWorkflowExecutionRequest(
            namespace=self.env.client.namespace,
            execution=WorkflowExecution(workflow_id=remediation_workflow_id(node)),
        )
        return await self.env.client.workflow_service.describe_workflow_execution(request)

    async def settle(self, node: str) -> None:
        """Until the ladder has no workflow task pending and what it scheduled has been picked
        up (bounded). The time-skipping server refuses to cancel an activity in the moment
        after it scheduled it (ACTIVITY_UNKNOWN: the workflow task's completion is refused and
        the ladder stands still) — its bug, seen on the code before this change too; the dev
        server cancels it (tests/test_abort_wins.py runs that case there)."""
        await asyncio.sleep(SETTLE_S)
        for _ in range(100):
            answer = await self.describe_raw(node)
            queued = [
                a
                for a in answer.pending_activities
                if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
            ]
            if not answer.HasField("pending_workflow_task") and not queued:
                return
            await asyncio.sleep(0.05)

    async def stuck_by_the_server(self, node: str) -> bool:
        """The ladder's last workflow task started and never completed: the server refused
        its completion (see ``settle``)."""
        events = (await self.handle(node).fetch_history()).events
        return bool(events) and events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED

    async def running(self, node: str) -> bool:
        return (await self.latest(node))[0] is WorkflowExecutionStatus.RUNNING

    async def sleep(self, span: timedelta) -> None:
        await clock_sleep(self.env, span)

    async def stop(self, node: str, signal: Any, request: Any) -> None:
        """Send an abort or clear as the signal (see the module's note on updates) to a
        running ladder, then let server time pass until it closed."""
        if not await self.running(node):
            return
        ladder = self.ladders[node][-1] if self.ladders[node] else None
        await self.settle(node)
        try:
            await signal.send(self.handle(node), request)
        except RPCError:
            return  # it closed meanwhile: nothing was stopped
        if signal is ABORT and ladder is not None and ladder.aborted_at is None:
            ladder.aborted_at = len(self.fleet.actions)
            COUNTS.aborts += 1
        deadline = self.loop.time() + STOP_WAIT_S
        for _ in range(STOP_WITHIN):
            if not await self.running(node) or self.loop.time() > deadline:
                break
            await self.sleep(timedelta(seconds=5))
        if await self.running(node):
            # Should the server's bug (settle) strike anyway, the ladder's tasks fail over and
            # over: not an interleaving remedy can be judged on, so the rest of the example is
            # set aside (and counted). Not assume(): hypothesis then sees the same draws end
            # sooner than before ("inconsistent data generation"); the steps still draw, as no-ops.
            if await self.stuck_by_the_server(node):
                COUNTS.discarded += 1
                self.set_aside = True
                return
            state = await self.handle(node).query(NodeRemediation.state)
            tail = [(a.action.value, a.result.value, a.detail[:80]) for a in state.attempts[-3:]]
            raise AssertionError(
                f"{node}: {signal.name} sent, still {state.phase}: {tail}; steps: {self.trace}"
            )
        if signal is ABORT and ladder is not None and ladder.closed_at is None:
            ladder.closed_at = len(self.fleet.actions)
