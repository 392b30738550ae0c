"""NodeRemediation on the time-skipping server, with the real activities over the simulated fleet.

Each test injects a fault the way a node agent would see it and checks the path the ladder took:
the outcome, the attempts the workflow recorded, and what actually happened to the node.
"""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from remedy.models import Action
from remedy.remediation import (
    AbortRequest,
    ApproveRequest,
    AttemptResult,
    ClearRequest,
    Outcome,
    Phase,
)
from remedy.runbook import RunbookSet
from remedy.sim import SimFleet
from tests.conftest import running_workers
from tests.ladder import report, state_of, wait_for_phase

NODE = "gpu-node-001"
HARDWARE = {"reset_gpu", "reboot", "replace"}


def actions_on(fleet: SimFleet, node: str = NODE) -> list[str]:
    return [action for name, action in fleet.actions if name == node]


async def test_transient_fault_cleared_in_tolerance_window_disrupts_nothing(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=3)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        fleet.clear_faults(NODE)  # the slowdown passes before the 10-minute window ends
        result = await handle.result()
    assert result.outcome is Outcome.CLEARED
    assert actions_on(fleet) == ["cordon", "restore"]  # stopped new work, then gave it back
    assert not fleet.node(NODE).unschedulable


async def test_fault_that_persists_through_the_window_climbs_the_ladder(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=3)
    # Outlives the window: the twin's clock never reaches the end of the 2-minute slowdown.
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        result = await handle.result()
        state = await state_of(handle)
    assert result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
    assert state.tolerance_ends_at and state.started_at
    assert (state.tolerance_ends_at - state.started_at).total_seconds() == 600
    assert state.attempts[-2].finished_at >= state.tolerance_ends_at  # nothing before expiry


async def test_cleared_signal_ends_the_window_early(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=0)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        await handle.signal("clear", ClearRequest(by="alice", reason="fan replaced"))
        result = await handle.result()
    assert result.outcome is Outcome.CLEARED
    assert "alice" in result.detail
    assert actions_on(fleet) == ["cordon", "restore"]


async def test_gpu_reset_fixes_uncorrectable_ecc(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        result = await handle.result()
    assert result.runbook == "gpu-memory-ecc"
    assert result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, AttemptResult.DONE),
                      (Action.RESET_GPU, AttemptResult.VERIFIED)]
    assert not fleet.node(NODE).unschedulable and not fleet.node(NODE).faults


async def test_reset_fails_then_reboot_fixes_a_gpu_off_the_bus(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=5)
    # The reset-class ladder tries a reset first; a GPU off the bus cannot be reset.
    runbook = shipped_runbooks.get("gpu-reset-class")
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await report(time_env.client, queues, finding, runbook)).result()
    assert result.outcome is Outcome.RECOVERED
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, AttemptResult.DONE),
                      (Action.RESET_GPU, AttemptResult.FAILED),
                      (Action.REBOOT, AttemptResult.VERIFIED)]
    assert "lost from the bus" in result.attempts[2].detail
    assert actions_on(fleet) == ["cordon", "drain", "reboot", "restore"]
    assert fleet.node(NODE).boot_id == 1


async def test_nothing_fixes_it_so_replace_after_approval(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=1)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        waiting = await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        assert "replace" not in actions_on(fleet)  # nothing is replaced before a human says so
        assert waiting.runbook and waiting.runbook.ladder[waiting.rung].action is Action.REPLACE
        await handle.signal("approve", ApproveRequest(by="bob", note="RMA opened"))
        result = await handle.result()
        state = await state_of(handle)
    assert result.outcome is Outcome.REPLACED
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, AttemptResult.DONE),
                      (Action.RESET_GPU, AttemptResult.UNVERIFIED),
                      (Action.DIAGNOSE, AttemptResult.FAILED),
                      (Action.REPLACE, AttemptResult.DONE)]
    assert fleet.node(NODE).generation == 1  # new hardware
    assert [(a.by, a.rung) for a in state.approvals] == [("bob", 3)]


async def test_approval_that_never_comes_times_out_to_needs_a_human(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=1)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        result = await handle.result()  # the 8-hour approval window passes in skipped time
    assert result.outcome is Outcome.NEEDS_HUMAN
    assert result.attempts[-1].action is Action.REPLACE
    assert result.attempts[-1].result is AttemptResult.APPROVAL_TIMED_OUT
    assert "replace" not in actions_on(fleet)
    assert fleet.node(NODE).unschedulable  # stays cordoned for the human


async def test_abort_stops_the_ladder_and_leaves_the_node_cordoned(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=0)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        await handle.signal("abort", AbortRequest(by="carol", reason="investigating by hand"))
        result = await handle.result()
    assert result.outcome is Outcome.ABORTED
    assert "carol" in result.detail
    assert actions_on(fleet) == ["cordon"]
    assert fleet.node(NODE).unschedulable


async def test_abort_with_restore_gives_the_node_back(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=0)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        await handle.signal("abort", AbortRequest(by="carol", reason="false alarm", restore=True))
        result = await handle.result()
    assert result.outcome is Outcome.ABORTED
    assert actions_on(fleet)[-1] == "restore"
    assert not fleet.node(NODE).unschedulable


async def test_second_report_for_the_same_node_joins_the_running_workflow(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    first = fleet.inject(NODE, "thermal_transient", gpu=0)
    second = fleet.inject(NODE, "thermal_transient", gpu=1)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, first, shipped_runbooks.match(first))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        again = await report(time_env.client, queues, second, shipped_runbooks.match(second))
        assert again.result_run_id == handle.result_run_id  # the same run, not a second ladder
        state = await state_of(handle)
        assert state.reports_received == 2
        assert [f.component.index for f in state.findings] == [0, 1]
        fleet.clear_faults(NODE)
        result = await handle.result()
    assert result.outcome is Outcome.CLEARED
    assert actions_on(fleet).count("cordon") == 1


async def test_more_severe_report_during_the_window_takes_over(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    slow = fleet.inject(NODE, "thermal_transient", gpu=0)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, slow, shipped_runbooks.match(slow))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        fleet.clear_faults(NODE)
        lost = fleet.inject(NODE, "gpu_lost", gpu=4)
        await report(time_env.client, queues, lost, shipped_runbooks.match(lost))
        result = await handle.result()
    assert result.runbook == "gpu-fallen-off-bus"
    assert result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == ["cordon", "drain", "reboot", "restore"]


async def test_application_xid_never_reaches_hardware_actions(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "app_xid", gpu=6)
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await report(time_env.client, queues, finding,
                                     shipped_runbooks.match(finding))).result()
    assert result.runbook == "application-xid"
    assert result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == []  # checked the GPU, did not even cordon
    assert fleet.node(NODE).pods[-1].name == f"train-{NODE}"  # the job was left alone


async def test_application_xid_on_a_bad_gpu_holds_for_a_human_without_hardware_actions(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    fleet.inject(NODE, "mcu_halt", gpu=6)  # the GPU really is broken under load
    finding = fleet.inject(NODE, "app_xid", gpu=6)
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await report(time_env.client, queues, finding,
                                     shipped_runbooks.match(finding))).result()
    assert result.outcome is Outcome.NEEDS_HUMAN
    assert not HARDWARE & set(actions_on(fleet))
    assert actions_on(fleet) == ["cordon"]  # held: a node nobody fixed takes no new work


async def test_node_cordoned_by_someone_else_stays_cordoned_after_recovery(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    fleet.cordon_by_hand(NODE)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await report(time_env.client, queues, finding,
                                     shipped_runbooks.match(finding))).result()
    assert result.outcome is Outcome.RECOVERED
    assert "restore" not in actions_on(fleet)
    assert fleet.node(NODE).unschedulable
    assert result.attempts[0].detail == "cordoned_by_other"


async def test_unknown_fault_is_cordoned_and_held_never_replaced(
        time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet) -> None:
    finding = fleet.inject(NODE, "ecc_dbe", gpu=0).model_copy(
        update={"check": "xid", "xid": 999, "reason": "Xid999"})
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "default-unknown-fault"
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await report(time_env.client, queues, finding, runbook)).result()
    assert result.outcome is Outcome.NEEDS_HUMAN
    assert actions_on(fleet) == ["cordon"]
