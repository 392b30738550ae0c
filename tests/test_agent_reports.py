"""The agent reports a finding once per change, not once per probe round (issue 32): a GPU
whose fault persists, raising its Xid again every round while its ladder waits (for a lease, a
person), sent one ``report_finding`` per fault and then one per round. Now a repeat that the
node's running ladder already has is folded (counted, not sent); a fault that comes back once
that ladder is over is reported again. The agent's rounds are driven by a clock the test moves;
its ladder is started on the time-skipping server and no worker runs it (it stays running)."""

from __future__ import annotations

import doctest
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import remediation_workflow_id
from remedy.core.models import Finding, NodeRef
from remedy.detection.probe.xid_events import XidWatcher
from remedy.ladder import report_changes
from remedy.ladder.remediation import FindingReport
from remedy.runbook import RunbookSet, load_runbooks
from tests.conftest import ROOT, running_workers
from tests.ladder import Handle, signed, wait_until
from tests.test_agent_writes import Clock
from workers.agent import AgentConfig, NodeAgent
from workers.client import report_finding

NODE = "r1-000"
ROUND = timedelta(seconds=30)


async def reports(client: Client, handle: WorkflowHandle[Any, Any]) -> list[FindingReport]:
    """The ``report_finding`` signals in the ladder's history, as sent."""
    run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    signalled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    payloads = [
        e.workflow_execution_signaled_event_attributes.input.payloads[0]
        async for e in run.fetch_history_events()
        if e.event_type == signalled
    ]
    return await client.data_converter.decode(payloads, [FindingReport] * len(payloads))


async def signals(client: Client, handle: WorkflowHandle[Any, Any]) -> int:
    return len(await reports(client, handle))


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
    # The Xid and what the probe found on that GPU are one fault: one report, the rest
    # folded into it (they went as four signals, one per check that saw the fault).
    assert first == 1
    ladder = client.get_workflow_handle(remediation_workflow_id(NODE))
    [sent] = await reports(client, ladder)
    assert sent.finding.reason == "Xid48" and sent.runbook.name == "gpu-memory-ecc"
    assert {f.reason for f in sent.also} == {
        "EccUncorrectable",
        "RowRemapPending",
        "RecoveryActionGpuReset",
    }
    assert {f.component.index for f in sent.findings()} == {3}

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


async def test_a_ladder_keeps_the_findings_folded_into_its_report(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """One signal, every check's finding in the ladder's record (its details, the handled
    fingerprints a later ladder drops late duplicates by)."""
    node = sorted(fleet.nodes)[0]
    xid = fleet.inject(node, "ecc_dbe", gpu=0)  # Xid 48
    ecc = xid.model_copy(update={"check": "memory", "reason": "EccUncorrectable", "xid": None})
    runbook = shipped_runbooks.match(xid)
    assert runbook is not None
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report_finding(
            time_env.client,
            NodeRef(name=node, pool=queues.pool),
            signed(queues, FindingReport(finding=xid, runbook=runbook, also=[ecc])),
            node_task_queue=queues.agents,
            task_queue=queues.controller,
        )
        # The door reads the first report in the ladder's first task: on a busy machine a
        # query can come before it (make test-stress saw reports_received 0).
        state = await wait_until(
            time_env, handle, lambda s: s.reports_received >= 1, "the report read"
        )
        await handle.terminate("seen enough")
    assert state.reports_received == 1 and state.findings == [xid, ecc]


async def test_a_late_report_starts_nothing_unless_a_finding_folded_into_it_is_new(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The stale-report check looks at every finding of a report: one the node's last ladder
    never had starts a new ladder, even when the lead is old news."""
    node = sorted(fleet.nodes)[0]
    xid = fleet.inject(node, "ecc_dbe", gpu=2)
    ecc = xid.model_copy(update={"check": "memory", "reason": "EccUncorrectable", "xid": None})
    runbook = shipped_runbooks.match(xid)
    assert runbook is not None
    async with running_workers(time_env.client, fleet) as queues:

        async def send(also: list[Finding]) -> Handle:
            return await report_finding(
                time_env.client,
                NodeRef(name=node, pool=queues.pool),
                signed(queues, FindingReport(finding=xid, runbook=runbook, also=also)),
                node_task_queue=queues.agents,
                task_queue=queues.controller,
            )

        first = await send([ecc])
        await first.result()
        late = await send([ecc])  # the same report, delivered again after the ladder ended
        later = ecc.model_copy(update={"observed_at": ecc.observed_at + timedelta(hours=1)})
        fresh = await send([later])  # an old lead, a new observation folded into it
        started = fresh.result_run_id != first.result_run_id
        if started:
            await fresh.terminate("seen enough")
    assert late.run_id == first.result_run_id  # every finding handled: nothing started
    assert started  # a new ladder
