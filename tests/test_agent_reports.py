"""The agent reports a finding once per change, not once per probe round (issue 32): a GPU
whose fault persists, raising its Xid again every round while its ladder waits (for a lease, a
person), sent one ``report_finding`` per fault and then one per round. Now a repeat that the
node's running ladder already has is folded (counted, not sent); a fault that comes back once
that ladder is over is reported again. The agent's rounds are driven by a clock the test moves;
its ladder is started on the time-skipping server and no worker runs it (it stays running)."""

from __future__ import annotations

import doctest
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import remediation_workflow_id
from remedy import report_changes
from remedy.models import NodeRef
from remedy.probe.xid_events import XidWatcher
from remedy.runbook import RunbookSet, load_runbooks
from tests.conftest import ROOT
from tests.test_agent_writes import Clock
from workers.agent import AgentConfig, NodeAgent

NODE = "r1-000"
ROUND = timedelta(seconds=30)


async def signals(client: Client, handle: WorkflowHandle) -> int:  # type: ignore[type-arg]
    run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    signalled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    return len([e async for e in run.fetch_history_events() if e.event_type == signalled])


async def test_a_persistent_fault_is_reported_once_per_change_not_per_round(
    time_env: WorkflowEnvironment,
) -> None:
    clock, client = Clock(), time_env.client
    fleet = SimFleet(nodes=1, name_prefix="r1", clock=clock)
    host = fleet.host(NODE)
    agent = NodeAgent(
        client,
        host,
        RunbookSet(load_runbooks([ROOT / "runbooks"])),
        None,
        AgentConfig(node=NodeRef(name=NODE), interval_s=ROUND.total_seconds()),
        clock=clock,
    )
    watcher = XidWatcher(NODE, host.nvml(), clock)
    assert watcher.start()

    async def probe_round() -> None:
        clock.now += ROUND
        await agent.tick(watcher.wait(0))

    await probe_round()
    assert agent.reports_sent == 0  # healthy: nothing to say
    fleet.inject(NODE, "ecc_dbe", gpu=3)  # NVML raises Xid 48; the probe sees the ECC error
    await probe_round()
    first = agent.reports_sent
    assert first >= 2  # the Xid and what the probe found: one report each
    ladder = client.get_workflow_handle(remediation_workflow_id(NODE))
    assert await signals(client, ladder) == first

    for _ in range(10):  # the fault persists, and the GPU raises its Xid whenever it is used
        fleet.node(NODE).push_xid(3, 48)
        await probe_round()
    assert agent.reports_sent == first  # nothing changed: nothing sent
    assert agent.reports_folded == 10  # the Xid again, each time: the ladder has it
    assert await signals(client, ladder) == first

    await ladder.terminate("the ladder is over, the GPU is not fixed")
    fleet.node(NODE).push_xid(3, 48)
    await probe_round()
    assert agent.reports_sent == first + 1  # the Xid once more: a new ladder takes it
    assert agent.reports_folded == 10


def test_a_change_is_a_new_fault_a_return_or_a_new_routing() -> None:
    assert doctest.testmod(report_changes).failed == 0
