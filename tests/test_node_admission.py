"""Node admission and the hardware record, on the time-skipping server: two deep diagnoses with
a gap, the validated label with serials, rejection to the replace runbook, and repeat-offender
GPUs blocklisted by serial."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.starts import start_admission
from adapters.sim import SimFleet
from contract.names import hardware_record_workflow_id, remediation_workflow_id
from remedy.core.models import NodeRef
from remedy.ladder.hardware import BlocklistPolicy, HardwareRecordState, Incident, UnblockRequest
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import RunbookSet
from remedy.scan.admission import AdmissionInput, AdmissionPhase, AdmissionPolicy, AdmissionResult
from tests.conftest import Queues, running_workers
from tests.ladder import Handle, report, wait_for_phase
from workflows.hardware_record import HardwareRecord
from workflows.node_admission import NodeAdmission
from workflows.node_remediation import NodeRemediation

NEW = "new-node-000"
GAP = timedelta(minutes=10)
T0 = datetime(2026, 11, 1, tzinfo=UTC)


async def admit(
    client: Client, queues: Queues, shipped: RunbookSet, policy: AdmissionPolicy | None = None
) -> WorkflowHandle[NodeAdmission, AdmissionResult]:
    # The handle start gives back: on the time-skipping server, only its result() skips time.
    handle: WorkflowHandle[NodeAdmission, AdmissionResult] = await start_admission(
        client,
        AdmissionInput(
            node=NodeRef(name=NEW, pool=queues.pool),
            node_task_queue=queues.agents,
            policy=policy or AdmissionPolicy(gap=GAP),
            failure_runbook=shipped.get("admission-failed"),
        ),
        task_queue=queues.controller,
        workflow=NodeAdmission.run,
    )
    return handle


async def record_of(client: Client, serial: str) -> HardwareRecordState:
    handle = client.get_workflow_handle_for(HardwareRecord.run, hardware_record_workflow_id(serial))
    return await handle.query(HardwareRecord.record)


async def test_a_node_that_passes_twice_is_admitted_with_its_serials(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = fleet.join(NEW)
    assert node.awaiting_admission
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await admit(time_env.client, queues, shipped_runbooks)).result()
    assert result.admitted, result.reason
    first, second = result.diagnoses
    assert first.healthy and second.healthy and "load" in first.detail
    assert second.at - first.at >= GAP  # the gap really passed between the two
    assert not node.awaiting_admission and node.rejected is None
    assert node.validated_serials == [g.serial for g in node.gpus] == result.serials
    assert len(result.serials) == 8


async def test_a_node_that_fails_the_second_diagnose_is_rejected_and_sent_to_replace(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = fleet.join(NEW)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await admit(time_env.client, queues, shipped_runbooks)
        for _ in range(100):  # in the gap, GPU 5 starts failing under load
            if (await handle.query(NodeAdmission.state)).phase is AdmissionPhase.WAITING_GAP:
                break
            await time_env.sleep(timedelta(seconds=5))
        fleet.inject(NEW, "mcu_halt", gpu=5)
        result = await handle.result()
        state = await handle.query(NodeAdmission.state)
        record = await record_of(time_env.client, node.gpus[5].serial)
        ladder: Handle = time_env.client.get_workflow_handle_for(
            NodeRemediation.run, state.remediation or ""
        )
        remediation = await wait_for_phase(time_env, ladder, Phase.AWAITING_APPROVAL)
    assert not result.admitted
    assert [d.healthy for d in result.diagnoses] == [True, False]
    assert result.reason.startswith("deep diagnose 2 of 2 failed: FailsUnderLoad on GPU 5")
    assert node.awaiting_admission and node.rejected == result.reason  # never takes work
    assert [i.outcome for i in record.incidents] == ["admission_failed"]
    assert remediation.runbook is not None and remediation.runbook.name == "admission-failed"
    assert remediation.cordon is not None  # waiting for a human to approve the replacement


async def test_three_incidents_on_one_gpu_blocklist_it_and_its_node_fails_admission(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    name = sorted(fleet.nodes)[0]
    serial = fleet.node(name).gpus[1].serial
    blocklist = BlocklistPolicy(max_incidents=3, window=timedelta(days=30))
    # Waited for in real time, with no timer in the ladder: while the test waits on a result,
    # an idle moment lets the time-skipping server jump to the next deadline it knows, the
    # test server's 10-year default timeout of the record itself, which then starts afresh.
    memory_ecc = shipped_runbooks.get("gpu-memory-ecc")
    quick = memory_ecc.model_copy(
        update={
            "watch": timedelta(0),
            "ladder": [r.model_copy(update={"settle": timedelta(0)}) for r in memory_ecc.ladder],
        }
    )
    async with running_workers(time_env.client, fleet, blocklist=blocklist) as queues:
        for time in range(3):  # the same GPU fails, is reset, recovers; three times
            # A day apart (sooner, the next ladder would resume above the reset); not after the
            # last: the blocklisted ladder's 8h approval window would pass before it is looked at.
            if time:
                await time_env.sleep(timedelta(hours=25))
            finding = fleet.inject(name, "ecc_dbe", gpu=1)
            handle = await report(time_env.client, queues, finding, quick)
            with time_env.auto_time_skipping_disabled():
                assert (await handle.result()).outcome is Outcome.RECOVERED
        for _ in range(400):  # the last incident's signal may not be applied yet (wall time)
            record = await record_of(time_env.client, serial)
            if record.blocked:
                break
            await asyncio.sleep(0.05)
        assert record.blocked and "3 incidents within 30 days" in (record.blocked_reason or "")
        # Blocked in service: the node waits for a replacement approval (runbook
        # blocklisted-serial); nobody approves, it is re-imaged instead.
        taken_out = time_env.client.get_workflow_handle_for(
            NodeRemediation.run, remediation_workflow_id(name)
        )
        await wait_for_phase(time_env, taken_out, Phase.AWAITING_APPROVAL)
        await taken_out.terminate("re-imaged instead")
        # The node is re-imaged and joins again: admission turns it away before any diagnose.
        fleet.nodes[NEW] = fleet.nodes.pop(name)
        fleet.nodes[NEW].name = NEW
        admission = await admit(time_env.client, queues, shipped_runbooks)
        with time_env.auto_time_skipping_disabled():  # turned away before any timer
            result = await admission.result()
    assert [i.fault for i in record.incidents] == ["Xid 48 on GPU 1 (" + serial + ")"] * 3
    assert not result.admitted and result.diagnoses == []
    assert result.reason.startswith(f"blocklisted: GPU {serial}: 3 incidents")
    assert fleet.node(NEW).awaiting_admission


def test_an_unblocked_gpu_starts_counting_again() -> None:
    record = HardwareRecordState(serial="SN1")
    policy = BlocklistPolicy(max_incidents=2)
    for day in (1, 2, 2):  # the last is a retried signal: counted once
        record.add(
            Incident(
                at=T0 + timedelta(days=day),
                node="n",
                fault="Xid 48",
                outcome="recovered",
                source=f"run-{day}",
            ),
            policy,
        )
    assert record.blocked and len(record.incidents) == 2
    record.unblock(UnblockRequest(by="sre", reason="RMA tested"), T0 + timedelta(days=3))
    record.add(
        Incident(
            at=T0 + timedelta(days=4), node="n", fault="Xid 48", outcome="recovered", source="run-4"
        ),
        policy,
    )
    assert not record.blocked  # one incident since the unblock
    record.add(
        Incident(
            at=T0 + timedelta(days=40),
            node="n",
            fault="Xid 48",
            outcome="recovered",
            source="run-40",
        ),
        policy,
    )
    assert not record.blocked  # day 4 left the 30-day window
    assert record.unblocked == [
        f"{T0 + timedelta(days=3)} by sre: RMA tested".replace(" 00:00:00+00:00", "T00:00:00+00:00")
    ]


def test_incidents_spread_over_time_do_not_block() -> None:
    record = HardwareRecordState(serial="SN2")
    for day in (0, 40, 80):
        record.add(
            Incident(
                at=T0 + timedelta(days=day),
                node="n",
                fault="Xid 79",
                outcome="recovered",
                source=f"run-{day}",
            ),
            BlocklistPolicy(),
        )
    assert not record.blocked and len(record.incidents) == 3
