"""The node agent against the real dev server: the probe loop finds an injected fault, starts the
node's remediation and serves its host-local rungs; a dead agent fails closed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.identity import agent_signing_key
from contract.names import remediation_workflow_id
from remedy.core.models import NodeRef
from remedy.detection.conditions import GPU_NETWORK_PROBLEM, GPU_PROBLEM, NodeCondition
from remedy.ladder.remediation import Outcome
from remedy.runbook import Match, Runbook, RunbookSet, load_runbooks
from tests.conftest import ROOT, running_workers
from tests.ladder import report, state_of
from workers.agent import AgentConfig, NodeAgent
from workflows.node_remediation import NodeRemediation

# Real time on the dev server: a bound against a hang, not a timing (a loaded machine took
# more than 30 s for the ladder below).
PATIENCE_S = 120.0


async def eventually(check: Callable[[], bool], seconds: float = PATIENCE_S) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never became true")


async def started(handle: WorkflowHandle[Any, Any], seconds: float = PATIENCE_S) -> None:
    """Wait until the workflow exists: the agent writes the node's condition before it
    signals-with-start the ladder, so a True condition does not mean the ladder is there yet."""
    for _ in range(int(seconds / 0.1)):
        try:
            await handle.describe()
            return
        except RPCError as err:
            if err.status is not RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(0.1)
    raise AssertionError(f"workflow {handle.id} never started")


async def rounds(agent: NodeAgent, count: int) -> None:
    """Wait until the agent has probed ``count`` more times."""
    for _ in range(count):
        last = agent.last_report
        await eventually(lambda: agent.last_report is not last)  # noqa: B023 - awaited here


@pytest.fixture
def fast_runbooks() -> RunbookSet:
    return RunbookSet(r.scaled(600) for r in load_runbooks([ROOT / "runbooks"]))


async def test_agent_finds_a_fault_starts_the_ladder_and_a_dead_agent_fails_closed(
    dev_env: WorkflowEnvironment, fast_runbooks: RunbookSet
) -> None:
    name = f"agent-{uuid.uuid4().hex[:8]}"
    # A check's bound as in production, not 0.5 s: on a busy machine a healthy check that took
    # longer failed closed, and its ProbeFailure became an extra transition of the condition.
    fleet = SimFleet(nodes=1, name_prefix=name, check_timeout_s=10.0, pool=name)
    node = f"{name}-000"
    client = dev_env.client
    conditions: list[NodeCondition] = []  # each change of status or reason, as seen

    def gpu_condition() -> NodeCondition | None:
        current = fleet.node(node).conditions.get(GPU_PROBLEM)
        last = conditions[-1] if conditions else None
        if current and (
            last is None or (last.status, last.reason) != (current.status, current.reason)
        ):
            conditions.append(current)
        return current

    async with running_workers(client, fleet, agents=False) as queues:  # controller only
        config = AgentConfig(
            node=NodeRef(name=node, pool=name),
            interval_s=0.2,
            task_queue=queues.agents,
            controller_task_queue=queues.controller,
            node_pickup_timeout=timedelta(seconds=1),
        )
        queues.known.add(*fast_runbooks)  # the controller climbs these, not the shipped ones
        # The simulated node's own key (it publishes it again): the test reports as it later.
        key = agent_signing_key(node)
        agent = NodeAgent(
            client, fleet.host(node), fast_runbooks, fleet.cluster.marks, config, key=key
        )
        running = asyncio.create_task(agent.run())

        await eventually(lambda: gpu_condition() is not None)
        healthy_since = conditions[0].last_transition_time
        assert (conditions[0].status, conditions[0].reason) == ("False", "NoGpuProblem")
        assert fleet.node(node).conditions[GPU_NETWORK_PROBLEM].status == "False"
        await rounds(agent, 3)  # more healthy rounds: the transition time must not move
        assert gpu_condition().last_transition_time == healthy_since  # type: ignore[union-attr]

        fleet.inject(node, "ecc_dbe", gpu=3)  # the agent is told nothing: it must find it
        handle = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
        await eventually(lambda: (gpu_condition() or conditions[0]).status == "True")
        await started(handle)
        result = await asyncio.wait_for(handle.result(), timeout=PATIENCE_S)
        assert result.runbook == "gpu-memory-ecc"
        assert result.outcome is Outcome.RECOVERED  # the agent served the reset itself
        assert [a for n, a in fleet.actions if n == node] == [
            "cordon",
            "drain",
            "reset_gpu",
            "restore",
        ]
        await eventually(lambda: gpu_condition().status == "False")  # type: ignore[union-attr]
        assert [c.status for c in conditions] == ["False", "True", "False"]
        assert conditions[1].reason in ("Xid48", "EccUncorrectable")
        # Kept on the node for job attribution, with the GPU's serial.
        assert [(x.code, x.gpu) for x in fleet.node(node).recent_xids] == [
            (48, fleet.node(node).gpus[3].serial)
        ]

        running.cancel()  # the agent dies
        with pytest.raises(asyncio.CancelledError):
            await running

        # The next probe of a remediation on this node finds nobody to run it: unhealthy
        # within the pickup timeout, never a pass.
        finding = fleet.inject(node, "thermal_transient", gpu=0)
        window = Runbook(
            name="watch",
            match=Match(checks=["thermal"]),
            tolerance=timedelta(seconds=3),
            recheck_every=timedelta(seconds=1),
        )
        watched = await report(
            client, queues, finding, window, node_pickup_timeout=timedelta(seconds=1)
        )
        result = await asyncio.wait_for(watched.result(), timeout=PATIENCE_S)
        state = await state_of(watched)
    assert result.outcome is Outcome.NEEDS_HUMAN  # not "cleared": the probe never ran
    assert state.last_probe is not None and not state.last_probe.healthy
    [unavailable] = state.last_probe.findings
    assert unavailable.reason == "ProbeUnavailable"
    assert "schedule" in unavailable.evidence.lower()
    assert fleet.node(node).unschedulable  # held cordoned for a human
