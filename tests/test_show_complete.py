"""`remedy show` and the Web UI's details leave nothing out: a rung that ran before an abort
stopped its verification, the rung being verified, the faults waiting their turn; and a worse
fault that comes during a rung's watch is cordoned at once. On the time-skipping server, with
the real activities over the simulated fleet."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import ABORT_LADDER
from remedy.core.models import Action
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.runbook import RunbookSet
from remedy.trust.decisions import AbortRequest
from tests.conftest import running_workers
from tests.ladder import Handle, report, send_report, wait_for_phase, wait_until
from tests.servers import finished
from workers.show import node_ladder, timeline

NODE = "gpu-node-001"


async def watching(handle: Handle) -> bool:
    """The rung's quiet watch has begun: its timer is in the history."""
    said = pydantic_data_converter.payload_converter.from_payload
    return any(
        e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and e.user_metadata.HasField("summary")
        and said(e.user_metadata.summary, str).startswith("watch ")
        for e in (await handle.fetch_history()).events
    )


async def until_watching(env: WorkflowEnvironment, handle: Handle) -> None:
    await wait_for_phase(env, handle, Phase.VERIFYING, step=timedelta(seconds=1))
    for _ in range(120):  # the verification probe first: real time, the clock not moved
        if await watching(handle):
            return
        await asyncio.sleep(0.25)
    raise AssertionError("the watch never began")


async def test_show_lists_the_reboot_an_abort_stopped_during_its_watch(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The issue's case: Xid 79, the reboot done, its 10-minute watch under way when the abort
    is accepted. Before, the reboot was in the history (reboot, confirm_reboot, probe) but not
    in the record: `show` printed cordon and drain only."""
    lost = fleet.inject(NODE, "gpu_lost", gpu=6)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, lost, shipped_runbooks.match(lost))
        await until_watching(time_env, handle)
        running = await node_ladder(time_env.client, NODE)
        await ABORT_LADDER.execute(handle, AbortRequest(by="carol", reason="vendor on site"))
        result = await finished(time_env, handle)
        closed = await node_ladder(time_env.client, NODE)
    # Once closed: the reboot ran, was not verified, and says why.
    assert result.outcome is Outcome.ABORTED
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, AttemptResult.DONE), (Action.REBOOT, AttemptResult.DONE)]
    shown = timeline(closed)
    [reboot] = [line for line in shown if " reboot " in line]
    assert reboot.startswith("  2 ") and " done " in reboot
    assert "not verified: the ladder was stopped during its 10m watch for Xid 79" in reboot
    # While it ran: the rung being verified, and how.
    assert running.now is not None
    assert (running.now.number, running.now.action, running.now.phase) == (2, "reboot", "verifying")
    assert f"10m watch for no Xid 79 on {lost.component.describe()}" in running.now.how
    [row] = [line for line in timeline(running) if line.startswith("  2 ") and "verifying" in line]
    assert " reboot " in row


async def test_show_and_the_details_list_a_fault_waiting_its_turn(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """Xid 79 reported while the Xid 13 ladder's diagnose runs: kept for the next rung
    boundary. Before, `show` never said so, and the details said only "handled after this
    fault"."""
    app = fleet.inject(NODE, "app_xid", gpu=6)
    held = fleet.hold("probe")  # the diagnose reads NVML: under way while Xid 79 comes
    async with running_workers(time_env.client, fleet) as queues:
        try:
            handle = await report(time_env.client, queues, app, shipped_runbooks.match(app))
            assert await asyncio.to_thread(held.entered.wait, 60)
            lost = fleet.inject(NODE, "gpu_lost", gpu=6)
            runbook = shipped_runbooks.match(lost)
            assert runbook is not None
            await send_report(handle, lost, runbook)
            state = await wait_until(time_env, handle, lambda s: bool(s.pending), "kept")
            shown = await node_ladder(time_env.client, NODE)
        finally:
            held.release()
        await finished(time_env, handle)
    said = (
        f"{lost.headline()} → gpu-fallen-off-bus: cordon, then drain (rung 1 of 4); "
        f"worse than {app.headline()}: takes over before the next rung"
    )
    assert f"  > waiting: {said}" in timeline(shown)
    assert [w.describe() for w in shown.waiting] == [said]
    assert shown.now is not None and (shown.now.action, shown.now.phase) == ("diagnose", "acting")
    details = remediation_details(state)
    assert f"**Waiting their turn**\n\n- {said}" in details
    assert "- **rung 1 diagnose**: acting since " in details


async def test_a_worse_fault_during_the_watch_is_cordoned_at_once(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """Xid 13's diagnose passed, its 10-minute watch under way on an uncordoned node; Xid 79
    comes. Before, it waited hidden for the rest of the watch; now the watch ends, the worse
    fault's runbook takes over and cordons within seconds of the server's clock."""
    app = fleet.inject(NODE, "app_xid", gpu=6)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, app, shipped_runbooks.match(app))
        await until_watching(time_env, handle)
        assert not fleet.node(NODE).unschedulable  # application-xid does not cordon
        lost = fleet.inject(NODE, "gpu_lost", gpu=6)
        runbook = shipped_runbooks.match(lost)
        assert runbook is not None
        await send_report(handle, lost, runbook)
        for _ in range(12):  # a minute of the server's clock at most: the watch had 10
            if fleet.node(NODE).unschedulable:
                break
            await time_env.sleep(5)
        assert fleet.node(NODE).unschedulable, "the worse fault was not cordoned at once"
        result = await finished(time_env, handle)
    [diagnose] = [a for a in result.attempts if a.action is Action.DIAGNOSE]
    assert diagnose.result is AttemptResult.UNVERIFIED
    assert f"{lost.headline()} came during the watch" in diagnose.detail
    assert result.runbook == "gpu-fallen-off-bus" and result.outcome is Outcome.RECOVERED
    actions = [action for name, action in fleet.actions if name == NODE]
    assert actions == ["cordon", "drain", "reboot", "restore"]
