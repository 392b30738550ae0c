"""NodeRemediation on the time-skipping server, with the real activities over the simulated fleet.

Each test injects a fault the way a node agent would see it and checks the path the ladder took:
the outcome, the attempts the workflow recorded, and what actually happened to the node.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.cluster import REMEDY_CORDON
from contract.messages import APPROVE
from remedy.core.errors import DrainBlocked, PermissionDenied
from remedy.core.models import Action
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.trust.decisions import AbortRequest, ApproveRequest, ClearRequest
from tests.conftest import running_workers
from tests.ladder import (
    Handle,
    remediate,
    report,
    send_report,
    signal_at,
    wait_for_phase,
    wait_until,
)

NODE = "gpu-node-001"
HARDWARE = {"reset_gpu", "reboot", "replace"}
DONE, FAILED = AttemptResult.DONE, AttemptResult.FAILED
VERIFIED, UNVERIFIED = AttemptResult.VERIFIED, AttemptResult.UNVERIFIED


def actions_on(fleet: SimFleet, node: str = NODE) -> list[str]:
    return [action for name, action in fleet.actions if name == node]


async def test_transient_fault_cleared_in_tolerance_window_disrupts_nothing(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=3)

    async def slowdown_passes(handle: Handle) -> None:
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        fleet.clear_faults(NODE)  # before the 10-minute window ends

    ran = await remediate(
        time_env, fleet, finding, shipped_runbooks.match(finding), slowdown_passes
    )
    assert ran.result.outcome is Outcome.CLEARED
    assert actions_on(fleet) == ["cordon", "restore"]  # stopped new work, then gave it back
    assert not fleet.node(NODE).unschedulable


async def test_fault_that_persists_through_the_window_climbs_the_ladder(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    # Outlives the window: the twin's clock stands still, so its 2-minute slowdown never ends,
    # however long a loaded machine takes (the wall's clock, the default, got there).
    still = datetime.now(UTC)
    fleet = SimFleet(nodes=4, gpus_per_node=8, clock=lambda: still)
    finding = fleet.inject(NODE, "thermal_transient", gpu=3)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
    state = ran.state
    assert state.tolerance_ends_at and state.started_at
    assert (state.tolerance_ends_at - state.started_at).total_seconds() == 600
    assert state.attempts[-2].finished_at >= state.tolerance_ends_at  # nothing before expiry


async def test_cleared_signal_ends_the_window_early(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=0)
    ran = await remediate(
        time_env,
        fleet,
        finding,
        shipped_runbooks.match(finding),
        signal_at(
            time_env, Phase.TOLERATING, "clear", ClearRequest(by="alice", reason="fan replaced")
        ),
    )
    assert ran.result.outcome is Outcome.CLEARED
    assert "alice" in ran.result.detail
    assert actions_on(fleet) == ["cordon", "restore"]


async def test_gpu_reset_fixes_uncorrectable_ecc(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.runbook == "gpu-memory-ecc"
    assert ran.result.outcome is Outcome.RECOVERED
    assert ran.ladder == [(Action.DRAIN, DONE), (Action.RESET_GPU, VERIFIED)]
    assert actions_on(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
    assert not fleet.node(NODE).unschedulable and not fleet.node(NODE).faults


async def test_reset_fails_then_reboot_fixes_a_gpu_off_the_bus(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=5)
    # The reset-class ladder tries a reset first; a GPU off the bus cannot be reset.
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.get("gpu-reset-class"))
    assert ran.result.outcome is Outcome.RECOVERED
    assert ran.ladder == [
        (Action.DRAIN, DONE),
        (Action.RESET_GPU, FAILED),
        (Action.REBOOT, VERIFIED),
    ]
    assert "lost from the bus" in ran.result.attempts[2].detail
    assert "rebooted: boot id boot-1, Ready" in ran.result.attempts[3].detail
    assert actions_on(fleet) == ["cordon", "drain", "reboot", "restore"]
    assert fleet.node(NODE).boot_id == 1


async def test_nothing_fixes_it_so_replace_after_approval(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=1)

    async def approve_replacement(handle: Handle) -> None:
        waiting = await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        assert "replace" not in actions_on(fleet)  # nothing is replaced before a human says so
        assert waiting.runbook and waiting.runbook.ladder[waiting.rung].action is Action.REPLACE
        await APPROVE.send(handle, ApproveRequest(by="bob", note="RMA opened"))

    ran = await remediate(
        time_env, fleet, finding, shipped_runbooks.match(finding), approve_replacement
    )
    assert ran.result.outcome is Outcome.REPLACED
    assert ran.ladder == [
        (Action.DRAIN, DONE),
        (Action.RESET_GPU, UNVERIFIED),
        (Action.DIAGNOSE, FAILED),
        (Action.REPLACE, DONE),
    ]
    assert fleet.node(NODE).generation == 1  # new hardware
    assert [(a.by, a.rung) for a in ran.state.approvals] == [("bob", 3)]


async def test_approval_that_never_comes_times_out_to_needs_a_human(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=1)
    # The 8-hour approval window passes in skipped time.
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    assert ran.ladder[-1] == (Action.REPLACE, AttemptResult.APPROVAL_TIMED_OUT)
    assert "replace" not in actions_on(fleet)
    assert fleet.node(NODE).unschedulable  # stays cordoned for the human


async def test_abort_stops_the_ladder_and_leaves_the_node_cordoned(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "thermal_transient", gpu=0)
    ran = await remediate(
        time_env,
        fleet,
        finding,
        shipped_runbooks.match(finding),
        signal_at(
            time_env,
            Phase.TOLERATING,
            "abort",
            AbortRequest(by="carol", reason="investigating by hand"),
        ),
    )
    assert ran.result.outcome is Outcome.ABORTED
    assert "carol" in ran.result.detail
    assert actions_on(fleet) == ["cordon"]
    assert fleet.node(NODE).unschedulable


async def test_abort_with_restore_gives_the_node_back(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=0)
    ran = await remediate(
        time_env,
        fleet,
        finding,
        shipped_runbooks.match(finding),
        signal_at(
            time_env,
            Phase.AWAITING_APPROVAL,
            "abort",
            AbortRequest(by="carol", reason="false alarm", restore=True),
        ),
    )
    assert ran.result.outcome is Outcome.ABORTED
    assert actions_on(fleet)[-1] == "restore"
    assert not fleet.node(NODE).unschedulable


async def test_second_report_for_the_same_node_joins_the_running_workflow(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    first = fleet.inject(NODE, "thermal_transient", gpu=0)
    second = fleet.inject(NODE, "thermal_transient", gpu=1)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, first, shipped_runbooks.match(first))
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        again = await report(time_env.client, queues, second, shipped_runbooks.match(second))
        assert again.result_run_id == handle.result_run_id  # the same run, not a second ladder
        # Taken once the controller checked who sent it (an activity: not at once).
        state = await wait_until(
            time_env, handle, lambda s: s.reports_received == 2, "the second report taken"
        )
        assert [f.component.index for f in state.findings] == [0, 1]
        fleet.clear_faults(NODE)
        result = await handle.result()
    assert result.outcome is Outcome.CLEARED
    assert actions_on(fleet).count("cordon") == 1


async def test_more_severe_report_during_the_window_takes_over(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    slow = fleet.inject(NODE, "thermal_transient", gpu=0)

    async def gpu_falls_off_the_bus(handle: Handle) -> None:
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        fleet.clear_faults(NODE)
        lost = fleet.inject(NODE, "gpu_lost", gpu=4)
        runbook = shipped_runbooks.match(lost)
        assert runbook is not None
        await send_report(handle, lost, runbook)

    ran = await remediate(
        time_env, fleet, slow, shipped_runbooks.match(slow), gpu_falls_off_the_bus
    )
    assert ran.result.runbook == "gpu-fallen-off-bus"
    assert ran.result.outcome is Outcome.RECOVERED
    assert actions_on(fleet) == ["cordon", "drain", "reboot", "restore"]
    [taken] = ran.result.escalations  # said where operators look
    assert (taken.kind, taken.from_runbook, taken.to_runbook) == (
        "escalated",
        "thermal",
        "gpu-fallen-off-bus",
    )


async def test_application_xid_never_reaches_hardware_actions(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "app_xid", gpu=6)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.runbook == "application-xid"
    assert ran.result.outcome is Outcome.RECOVERED
    assert ran.ladder == [(Action.DIAGNOSE, VERIFIED)]
    assert actions_on(fleet) == []  # checked the GPU, did not even cordon
    assert fleet.node(NODE).pods[-1].name == f"train-{NODE}"  # the job was left alone


async def test_application_xid_on_a_bad_gpu_holds_for_a_human_without_hardware_actions(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    fleet.inject(NODE, "mcu_halt", gpu=6)  # the GPU really is broken under load
    finding = fleet.inject(NODE, "app_xid", gpu=6)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    assert not HARDWARE & set(actions_on(fleet))
    assert actions_on(fleet) == ["cordon"]  # held: a node nobody fixed takes no new work


async def test_node_cordoned_by_someone_else_stays_cordoned_after_recovery(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    fleet.cordon_by_hand(NODE)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.RECOVERED
    assert "restore" not in actions_on(fleet)
    assert fleet.node(NODE).unschedulable
    assert ran.result.attempts[0].detail == "cordoned_by_other"


async def test_unknown_fault_is_cordoned_and_held_never_replaced(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    # A check only a newer agent knows (an unknown Xid is xid-needs-a-person's: also held).
    finding = fleet.inject(NODE, "ecc_dbe", gpu=0).model_copy(
        update={
            "check": "future_check",
            "xid": None,
            "reason": "FutureReason",
            "nvidia_action": None,
        }
    )
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "default-unknown-fault"
    ran = await remediate(time_env, fleet, finding, runbook)
    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    assert actions_on(fleet) == ["cordon"]


async def test_failed_restore_leaves_the_node_owned_and_says_so(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    fleet.break_action("restore", PermissionDenied("nodes patch is forbidden"))
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.RECOVERED
    assert ran.result.attempts[-1].action is Action.RESTORE
    assert ran.result.attempts[-1].result is FAILED
    assert "PermissionDenied" in ran.result.attempts[-1].detail
    assert "could not uncordon" in ran.result.detail
    node = fleet.node(NODE)
    assert node.unschedulable and REMEDY_CORDON in node.annotations  # still remedy's, visibly


async def test_drain_that_keeps_failing_never_leads_to_a_reset_or_reboot_of_the_node(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    fleet.break_action("drain", DrainBlocked("a PodDisruptionBudget forbids the eviction"))
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    # The drain is retried (transient), fails, is tried once more before the reset, and the
    # reset then waits for a person (if_drain_failed: ask); nobody came: held, nothing ran.
    assert ran.ladder == [
        (Action.DRAIN, FAILED),
        (Action.DRAIN, FAILED),
        (Action.RESET_GPU, AttemptResult.APPROVAL_TIMED_OUT),
    ]
    assert "DrainBlocked" in ran.result.attempts[1].detail
    assert "again before reset_gpu" in ran.result.attempts[2].detail
    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    assert "approval to reset_gpu undrained" in ran.result.detail
    assert not HARDWARE & set(actions_on(fleet))
    assert fleet.node(NODE).unschedulable


async def test_reboot_that_never_comes_back_fails_the_rung(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    fleet.node(NODE).comes_back = False
    finding = fleet.inject(NODE, "gpu_lost", gpu=0)
    runbook = Runbook(
        name="reboot-only",
        match=Match(xids=[79]),
        ladder=[Rung(action=Action.REBOOT, timeout=timedelta(seconds=2))],
    )
    ran = await remediate(time_env, fleet, finding, runbook)
    # The agent answered, but the node never reported a new boot id: not a recovery.
    assert ran.ladder == [(Action.DRAIN, DONE), (Action.REBOOT, FAILED)]  # drained first
    assert "timeout" in ran.result.attempts[-1].detail.lower()
    assert ran.result.outcome is Outcome.NEEDS_HUMAN


async def test_a_cordon_rung_cordons_and_is_restored_after_recovery(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """A runbook that watches first (no cordon on arrival) and cordons as its first rung. The
    cordon activity answers who holds the cordon, which a plain action result is not: before
    the handler map, the rung could not decode that answer and the ladder never moved on."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=1)
    runbook = Runbook(
        name="cordon-then-reset",
        match=[Match(xids=[48])],
        cordon=False,
        ladder=[Rung(action=a) for a in (Action.CORDON, Action.DRAIN, Action.RESET_GPU)],
    )
    ran = await remediate(time_env, fleet, finding, runbook)
    assert ran.result.outcome is Outcome.RECOVERED
    assert ran.ladder == [(Action.CORDON, DONE), (Action.DRAIN, DONE), (Action.RESET_GPU, VERIFIED)]
    assert actions_on(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
    assert not fleet.node(NODE).unschedulable  # remedy's own cordon, given back
