"""Two faults on one node: a worse one that arrives mid-ladder takes over, and a fault on another
GPU gets its own runbook after the first is verified — on the time-skipping server, with the
real activities over the simulated fleet."""

from __future__ import annotations

import asyncio

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.core.models import Action
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from tests.conftest import running_workers
from tests.ladder import report, send_report, state_of
from tests.servers import finished
from workers.show import NodeLadder, timeline

NODE = "gpu-node-001"


def on_node(fleet: SimFleet) -> list[str]:
    return [action for name, action in fleet.actions if name == NODE]


async def test_an_application_xid_then_a_gpu_off_the_bus_ends_with_a_reboot(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The issue's demo: Xid 13 started application-xid (diagnose only, no cordon); Xid 79
    came while the diagnose ran. Before, the ladder ended needs_human on the application's
    runbook and never rebooted; now the worse fault's runbook takes over."""
    app = fleet.inject(NODE, "app_xid", gpu=6)
    held = fleet.hold("probe")  # the diagnose reads NVML: it is under way while Xid 79 comes
    async with running_workers(time_env.client, fleet) as queues:
        try:
            handle = await report(time_env.client, queues, app, shipped_runbooks.match(app))
            assert await asyncio.to_thread(held.entered.wait, 60)
            lost = fleet.inject(NODE, "gpu_lost", gpu=6)
            runbook = shipped_runbooks.match(lost)
            assert runbook is not None and runbook.name == "gpu-fallen-off-bus"
            await send_report(handle, lost, runbook)
        finally:
            held.release()
        result = await finished(time_env, handle)
        state = await state_of(handle)
    assert result.outcome is Outcome.RECOVERED, result.detail
    assert result.runbook == "gpu-fallen-off-bus"
    assert on_node(fleet) == ["cordon", "drain", "reboot", "restore"]
    [escalation] = state.escalations
    assert escalation.describe() == (
        "escalated from application-xid to gpu-fallen-off-bus because Xid 79 on GPU 6 "
        f"({fleet.node(NODE).gpus[6].serial})"
    )
    reboot = next(a for a in result.attempts if a.action is Action.REBOOT)
    assert reboot.result is AttemptResult.VERIFIED and reboot.epoch == 1
    # Where operators look: `remedy show`'s timeline and the Web UI's details.
    shown = timeline(
        NodeLadder(
            node=NODE,
            runbook=result.runbook,
            status=result.outcome.value,
            attempts=result.attempts,
            escalations=result.escalations,
        )
    )
    assert [line for line in shown if line.startswith("  ^ ")] == [
        f"  ^ {escalation.at:%H:%M:%S} {escalation.describe()}"
    ]
    assert f"**Escalated** {escalation.describe()}" in remediation_details(state)


async def test_another_gpus_fault_is_its_own_finding_not_a_failed_verification(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """A reset of GPU 6 for its ECC error is verified by GPU 6's checks, although GPU 0 has
    a row remap failure; GPU 0's fault then gets its own runbook, past the drain already
    done. Before, GPU 0 made the reset of GPU 6 'unverified' and the ladder rebooted."""
    ecc = fleet.inject(NODE, "ecc_dbe", gpu=6)
    fleet.inject(NODE, "remap_failure", gpu=0)  # no report: only the probe will see it
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, ecc, shipped_runbooks.match(ecc))
        result = await finished(time_env, handle)
        state = await state_of(handle)
    ladder = [(a.action, a.result, a.epoch) for a in result.attempts if a.rung >= 0]
    assert ladder[:3] == [
        (Action.DRAIN, AttemptResult.DONE, 0),
        (Action.RESET_GPU, AttemptResult.VERIFIED, 0),
        (Action.RESET_GPU, AttemptResult.UNVERIFIED, 1),  # GPU 0's runbook: no second drain
    ]
    resets = [a.detail for a in result.attempts if a.action is Action.RESET_GPU]
    assert resets[0].startswith("reset GPU 6;") and "elsewhere: Xid 64" not in resets[0]
    assert resets[1].startswith("reset GPU 0;")
    [continued] = state.escalations
    assert continued.kind == "continued"
    assert (continued.from_runbook, continued.to_runbook) == (
        "gpu-memory-ecc",
        "gpu-row-remap-failure",
    )
    # The details' heading names the fault that drives the ladder now, and the one it began with.
    assert remediation_details(state).splitlines()[0] == (
        f"### {NODE}: {state.trigger.headline() if state.trigger else ''}"
        f" (the ladder began with {ecc.headline()})"
    )
    assert "reboot" not in on_node(fleet)  # GPU 6 was fixed; GPU 0 needs new hardware
    assert result.runbook == "gpu-row-remap-failure"
    assert result.outcome is Outcome.NEEDS_HUMAN  # replace waits for an approval nobody gave
    assert fleet.node(NODE).unschedulable


async def test_a_diagnose_judges_the_gpu_it_verifies_and_the_other_failing_gpu_comes_next(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """GPU 3 fails under load (only the deep diagnose sees it); GPU 5 does too. The reset of
    GPU 3 is verified by the diagnose on GPU 3, and GPU 5's fault, which only that diagnose
    showed, is next with its own ladder. Before, GPU 5 made GPU 3's reset 'unverified'."""
    finding = fleet.inject(NODE, "silent_under_load", gpu=3)
    fleet.inject(NODE, "silent_under_load", gpu=5)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        result = await finished(time_env, handle)
        state = await state_of(handle)
    resets = [a for a in result.attempts if a.action is Action.RESET_GPU]
    assert [(a.result, a.epoch) for a in resets] == [
        (AttemptResult.VERIFIED, 0),
        (AttemptResult.VERIFIED, 1),
    ]
    assert resets[0].detail.startswith("reset GPU 3;") and "diagnose passed on GPU 3" in (
        resets[0].detail
    )
    assert resets[1].detail.startswith("reset GPU 5;")
    [continued] = state.escalations
    assert continued.kind == "continued" and "on GPU 5" in continued.because
    assert result.outcome is Outcome.RECOVERED
    assert on_node(fleet) == ["cordon", "drain", "reset_gpu", "reset_gpu", "restore"]
