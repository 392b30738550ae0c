"""NodeRemediation paths that need the real dev server rather than the time-skipping one."""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.host import SimHost
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import Queues, running_workers
from tests.ladder import report, state_of
from workers.controller import controller_worker, node_agent_worker
from workers.door import DoorSettings
from workflows.node_remediation import NodeRemediation

NODE = "gpu-node-002"


async def test_dead_node_agent_fails_closed(dev_env: WorkflowEnvironment, fleet: SimFleet) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=0)
    runbook = Runbook(
        name="reboot-then-diagnose",
        match=Match(xids=[79]),
        ladder=[Rung(action=Action.REBOOT), Rung(action=Action.DIAGNOSE)],
    )
    async with running_workers(dev_env.client, fleet, agents=False) as queues:
        handle = await report(
            dev_env.client, queues, finding, runbook, node_pickup_timeout=timedelta(seconds=1)
        )
        result = await asyncio.wait_for(handle.result(), timeout=30)
    # No agent picked the reboot or the diagnose up: each counts as failed, never as healthy,
    # and the node is held cordoned for a human.
    assert result.outcome is Outcome.NEEDS_HUMAN
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [
        (Action.DRAIN, AttemptResult.DONE),  # the node's drain before the reboot: the cluster's
        (Action.REBOOT, AttemptResult.FAILED),
        (Action.DIAGNOSE, AttemptResult.FAILED),
    ]
    reboot = next(a for a in result.attempts if a.action is Action.REBOOT)
    assert "schedule" in reboot.detail.lower()
    assert fleet.node(NODE).unschedulable and fleet.node(NODE).boot_id == 0


async def test_long_tolerance_window_continues_as_new_and_keeps_its_state(
    dev_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=1)
    runbook = Runbook(
        name="recheck-often",
        match=Match(checks=["thermal"]),
        tolerance=timedelta(minutes=5),
        recheck_every=timedelta(milliseconds=100),
    )
    async with running_workers(dev_env.client, fleet) as queues:
        handle = await report(dev_env.client, queues, finding, runbook)
        # A handle without a run id follows the chain of continue-as-new runs.
        latest = dev_env.client.get_workflow_handle_for(NodeRemediation.run, handle.id)
        for _ in range(300):
            state = await state_of(latest)
            if state.runs >= 3:
                break
            await asyncio.sleep(0.1)
        assert state.runs >= 3, "history never suggested continue-as-new"
        fleet.clear_faults(NODE)
        result = await asyncio.wait_for(latest.result(), timeout=30)
        final = await state_of(latest)
    assert result.outcome is Outcome.CLEARED
    assert final.reports_received == 1 and final.findings == [finding]  # carried over whole
    assert [action for name, action in fleet.actions if name == NODE] == ["cordon", "restore"]


class _SlowReset(SimHost):
    """A reset that takes until the test lets it finish."""

    def __init__(
        self, fleet: SimFleet, name: str, started: threading.Event, finish: threading.Event
    ) -> None:
        super().__init__(fleet, name)
        self._started, self._finish = started, finish

    def reset_gpus(self, indices: list[int], key: str = "") -> str:
        self._started.set()
        self._finish.wait(30)
        return super().reset_gpus(indices, key)


async def test_a_ladder_evicted_mid_reset_closes_cleanly_and_resumes_elsewhere(
    dev_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """A controller that stops while a reset runs evicts the ladder from its cache: closing it
    must not try to schedule work (it once awaited `return_gpus` in a `finally`, which failed
    outside the workflow's event loop); the next controller replays it and gives the GPUs
    back."""
    client = dev_env.client
    started, finish = threading.Event(), threading.Event()
    finding = fleet.inject(NODE, "ecc_dbe", gpu=1)
    runbook = Runbook(
        name="drain-then-reset",
        match=Match(xids=[48]),
        watch=timedelta(0),  # a real-time server: look for the Xid once, no 10-minute watch
        ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
    )
    queue = f"evict-{uuid.uuid4().hex[:6]}"
    queues = Queues(controller=queue, agents=f"{queue}-agents", pool=fleet.nodes[NODE].pool)
    policy = BudgetPolicy(max_disruption="4", storm_share=1.0)
    with ThreadPoolExecutor(max_workers=8) as executor:
        async with node_agent_worker(
            client, lambda n: _SlowReset(fleet, n, started, finish), executor, queues.agents
        ):
            door = DoorSettings(seal=queues.seal, agents_queue=queues.agents)
            known = queues.known
            async with controller_worker(
                client, fleet.cluster, executor, queue, policy, known, door=door
            ):
                handle = await report(client, queues, finding, runbook)
                assert await asyncio.to_thread(started.wait, 30)
            gc.collect()  # the evicted ladder's coroutine is closed here, at the latest
            finish.set()
            async with controller_worker(
                client, fleet.cluster, executor, queue, policy, known, door=door
            ):
                result = await asyncio.wait_for(handle.result(), 60)
    assert result.outcome is Outcome.RECOVERED
    assert [a for n, a in fleet.actions if n == NODE][-2:] == ["reset_gpu", "restore"]
