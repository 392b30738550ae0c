"""A GPU blocklisted while in service: the node that holds it goes to its replace rung at once,
cordoned and waiting for an approval (runbooks/blocklisted-serial.yaml)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import remediation_workflow_id
from remedy.core.models import Action, NodeRef
from remedy.ladder.hardware import BlocklistPolicy, HardwareRecordState, Incident, InService
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import RunbookSet
from tests.conftest import running_workers
from tests.ladder import report, wait_for_phase
from tests.test_node_admission import record_of
from workflows.node_remediation import NodeRemediation

T0 = datetime(2026, 11, 1, tzinfo=UTC)
HERE = InService(node=NodeRef(name="n", pool="p"), node_task_queue="q")


def _incident(day: int, outcome: str = "recovered") -> Incident:
    return Incident(
        at=T0 + timedelta(days=day), node="n", fault="Xid 48", outcome=outcome, source=f"r{day}"
    )


def test_only_the_incident_that_blocks_a_gpu_still_in_service_takes_its_node_out() -> None:
    policy = BlocklistPolicy(max_incidents=2)
    record = HardwareRecordState(serial="SN1")
    record.add(_incident(1), policy, HERE)
    assert record.take_out is None  # one incident: not blocked
    record.add(_incident(2), policy, HERE)
    assert record.blocked and record.take_out == HERE
    replaced = HardwareRecordState(serial="SN2")
    for day in (1, 2):
        replaced.add(_incident(day, "replaced"), policy, HERE)
    assert replaced.blocked and replaced.take_out is None  # the GPU left with the old node


async def test_a_gpu_blocklisted_in_service_sends_its_node_to_replace_awaiting_approval(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    name = sorted(fleet.nodes)[0]
    serial = fleet.node(name).gpus[1].serial
    blocklist = BlocklistPolicy(max_incidents=2, window=timedelta(days=30))
    async with running_workers(time_env.client, fleet, blocklist=blocklist) as queues:
        for _ in range(2):  # the same GPU fails, is reset, recovers: the second blocks it
            finding = fleet.inject(name, "ecc_dbe", gpu=1)
            handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
            # Polled, not awaited with result(): while a result is awaited the test server may
            # skip to the next deadline it knows, and with no timer pending that is the 10-year
            # execution timeout it gives every workflow — the GPU's record would time out and
            # lose its first incident.
            done = await wait_for_phase(time_env, handle, Phase.DONE)
            assert done.outcome is Outcome.RECOVERED
        ladder = time_env.client.get_workflow_handle_for(
            NodeRemediation.run, remediation_workflow_id(name)
        )
        state = await wait_for_phase(time_env, ladder, Phase.AWAITING_APPROVAL)
        record = await record_of(time_env.client, serial)
    assert state.runbook is not None and state.runbook.name == "blocklisted-serial"
    assert state.trigger is not None and state.trigger.reason == "Blocklisted"
    assert state.runbook.ladder[state.rung].action is Action.REPLACE
    assert fleet.node(name).unschedulable  # no new work on it while a person decides
    assert "replace" not in [a for n, a in fleet.actions if n == name]
    assert record.take_out is None and f"{name}: sent to its replace rung" in record.taken_out[0]
