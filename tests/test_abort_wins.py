"""An accepted abort stops the ladder in every phase, and nothing disruptive runs after it.

Each test brings a real NodeRemediation (time-skipping server, the real activities over the
simulated fleet) into one phase — tolerating, probing, acting, settling, verifying, waiting for
a lease or an approval — aborts it with the update, and checks the ladder ended ``aborted`` and
that the fleet saw no disruptive action begin after the abort. A phase that is an activity under
way (a probe, a drain) is held mid-call in the simulator (``SimFleet.hold``), so the abort comes
while it runs, as when an agent is dead and its probes hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import UpdateWorkflowExecutionLifecycleStage
from temporalio.api.update.v1 import UpdateRef, WaitPolicy
from temporalio.api.workflowservice.v1 import PollWorkflowExecutionUpdateRequest
from temporalio.client import Client, WorkflowUpdateHandle, WorkflowUpdateStage
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.fleet import Held
from contract.messages import ABORT_LADDER
from remedy.core.actions import ACTIONS
from remedy.core.models import Action, Finding, Severity
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import AttemptResult, Outcome, Phase, StopResult
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.trust.decisions import AbortRequest
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.servers import finished

NODE = "gpu-node-001"
DISRUPTIVE = {a.value for a, spec in ACTIONS.items() if spec.disruptive}
ADMITTED = UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED


def probe_failure(fleet: SimFleet) -> Finding:
    """What the fleet scan reports for a node whose checks cannot run (probe-failure:
    cordon, 5 minutes of tolerance re-probed every minute, then drain and reboot)."""
    return Finding(
        node=NODE,
        check="probe",
        reason="ProbeUnavailable",
        severity=Severity.CRITICAL,
        evidence="the agent does not answer",
        observed_at=datetime.now(UTC),
    )


async def held_entered(held: Held) -> None:
    """Until the held action has begun (a real thread event; bounded, generous)."""
    assert await asyncio.to_thread(held.entered.wait, 60), "the held action never began"


@asynccontextmanager
async def ladder(
    env: WorkflowEnvironment,
    fleet: SimFleet,
    finding: Finding,
    runbook: Runbook | None,
    policy: BudgetPolicy | None = None,
) -> AsyncIterator[Handle]:
    async with running_workers(env.client, fleet, policy=policy) as queues:
        try:
            yield await report(env.client, queues, finding, runbook)
        finally:
            for held in fleet.holds.values():
                held.release()  # the workers wait for their activities to end


async def abort(handle: Handle, by: str = "carol") -> StopResult:
    return await ABORT_LADDER.execute(handle, AbortRequest(by=by, reason="investigating"))


async def abort_accepted(handle: Handle, by: str = "carol") -> WorkflowUpdateHandle[StopResult]:
    """The abort, once the workflow accepted it (its answer comes when the ladder stopped)."""
    return await handle.start_update(
        ABORT_LADDER.name,
        AbortRequest(by=by, reason="investigating"),
        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        result_type=StopResult,
    )


async def admitted(client: Client, handle: Handle, update_id: str) -> None:
    """Until the server has the update (admitted: not yet delivered to the workflow); polled,
    bounded, generous."""
    request = PollWorkflowExecutionUpdateRequest(
        namespace=client.namespace,
        update_ref=UpdateRef(
            workflow_execution=WorkflowExecution(workflow_id=handle.id), update_id=update_id
        ),
        wait_policy=WaitPolicy(lifecycle_stage=ADMITTED),
    )
    for _ in range(600):
        try:
            await client.workflow_service.poll_workflow_execution_update(request)
            return
        except RPCError as err:
            if err.status is not RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(0.1)
    raise AssertionError(f"the server never admitted update {update_id}")


async def assert_stopped_cleanly(
    env: WorkflowEnvironment,
    handle: Handle,
    fleet: SimFleet,
    before: int,
    in_flight: str | None = None,
) -> None:
    """Aborted, and no disruptive action began after the abort (``before``: the fleet's
    actions at the abort; ``in_flight``: the one held mid-call when it came, which may land)."""
    for held in fleet.holds.values():
        held.release()
    result = await finished(env, handle)
    assert result.outcome is Outcome.ABORTED, result.detail
    after = [action for node, action in fleet.actions[before:] if node == NODE]
    if in_flight in after:
        after.remove(in_flight)
    assert not DISRUPTIVE & set(after), f"after the abort: {after}"
    # The workflow is closed: it can schedule nothing more. Its record says the same.
    state = await state_of(handle)
    assert state.phase is Phase.DONE and state.outcome is Outcome.ABORTED


async def test_abort_while_a_probe_hangs_stops_before_the_drain(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The issue's case: a probe-failure ladder re-probing a dead agent; before, the
    cancelled probe read as a failed one and the ladder went on to drain."""
    async with ladder(
        time_env, fleet, probe_failure(fleet), shipped_runbooks.get("probe-failure")
    ) as handle:
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        held = fleet.hold("probe")
        await time_env.sleep(61)  # the first re-probe of the window starts, and hangs
        await held_entered(held)
        before = len(fleet.actions)
        stopped = await abort(handle)
        assert stopped.outcome is Outcome.ABORTED and stopped.phase is Phase.DONE
        await assert_stopped_cleanly(time_env, handle, fleet, before)
    assert fleet.node(NODE).unschedulable  # left as it is: cordoned, for the person


async def test_abort_while_draining_waits_for_the_drain_and_climbs_no_further(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """Before, the cancelled drain read as a failed rung and the ladder went on to reset and
    reboot. Now the drain is cancelled and waited for; nothing comes after it. The drain here
    finished all the same (its gate let go after the abort was accepted): the record says it
    was done, and what it did — not that it was cut short (before: "cancelled")."""
    held = fleet.hold("drain")
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with ladder(time_env, fleet, finding, shipped_runbooks.get("gpu-memory-ecc")) as handle:
        await held_entered(held)
        before = len(fleet.actions)
        accepted = await abort_accepted(handle)
        held.release()  # the drain in flight ends; its answer drives nothing
        await assert_stopped_cleanly(time_env, handle, fleet, before, in_flight="drain")
        assert (await accepted.result()).phase is not None
        state = await state_of(handle)
    [drain] = [a for a in state.attempts if a.action is Action.DRAIN]
    assert drain.result is AttemptResult.DONE
    assert "evicted" in drain.detail and "finished after the ladder was stopped" in drain.detail
    assert [a.action for a in state.attempts if a.rung >= 0] == [Action.DRAIN]


async def test_a_second_abort_is_answered_not_refused(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    held = fleet.hold("drain")
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with ladder(time_env, fleet, finding, shipped_runbooks.get("gpu-memory-ecc")) as handle:
        await held_entered(held)
        await abort_accepted(handle, by="carol")
        second = await abort_accepted(handle, by="dave")  # accepted too: not refused
        held.release()
        again = await second.result()
        result = await finished(time_env, handle)
    assert again.already.startswith("carol")
    assert result.outcome is Outcome.ABORTED and result.detail.startswith("aborted by carol")


@pytest.mark.parametrize(
    ("runbook", "fault", "phase", "policy"),
    [
        ("thermal", "thermal_transient", Phase.TOLERATING, None),
        ("gpu-row-remap-failure", "remap_failure", Phase.AWAITING_APPROVAL, None),
        ("gpu-memory-ecc", "ecc_dbe", Phase.AWAITING_LEASE, BudgetPolicy(max_disruption="0")),
        ("gpu-memory-ecc", "ecc_dbe", Phase.SETTLING, None),
    ],
)
async def test_abort_in_a_waiting_phase_stops_the_ladder(
    time_env: WorkflowEnvironment,
    fleet: SimFleet,
    shipped_runbooks: RunbookSet,
    runbook: str,
    fault: str,
    phase: Phase,
    policy: BudgetPolicy | None,
) -> None:
    finding = fleet.inject(NODE, fault, gpu=1)
    async with ladder(time_env, fleet, finding, shipped_runbooks.get(runbook), policy) as handle:
        await wait_for_phase(time_env, handle, phase, step=_step(phase))
        before = len(fleet.actions)
        stopped = await abort(handle)
        assert stopped.outcome is Outcome.ABORTED
        await assert_stopped_cleanly(time_env, handle, fleet, before)


async def test_abort_while_verifying_stops_before_the_next_rung(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """A reset that did not fix the GPU, its verification probe under way: the abort wins
    over the reboot that would come next (before, the cancelled probe read as "still
    unhealthy" and the reboot ran)."""
    reset_then_reboot = Runbook(
        name="reset-then-reboot",
        match=[Match(xids=[64])],
        ladder=[
            Rung(action=Action.DRAIN),
            Rung(action=Action.RESET_GPU, settle=timedelta(seconds=30)),
            Rung(action=Action.REBOOT),
        ],
    )
    finding = fleet.inject(NODE, "remap_failure", gpu=1)  # a reset cannot fix it
    async with ladder(time_env, fleet, finding, reset_then_reboot) as handle:
        await wait_for_phase(time_env, handle, Phase.SETTLING, step=_step(Phase.SETTLING))
        held = fleet.hold("probe")
        await time_env.sleep(31)  # the settle ends; the verification probe hangs
        await held_entered(held)
        before = len(fleet.actions)
        assert (await abort(handle)).outcome is Outcome.ABORTED
        await assert_stopped_cleanly(time_env, handle, fleet, before)
    assert "reboot" not in {a for _, a in fleet.actions}


def _step(phase: Phase) -> timedelta:
    """Poll in steps shorter than the phase: a 30 s settle must not pass between polls."""
    return timedelta(seconds=1 if phase is Phase.SETTLING else 5)


async def test_an_abort_right_after_the_report_wins_over_the_cordon_under_way(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """Found by the ladder model: the abort comes while the first cordon is under way. Before,
    the cancelled cordon read as a failed one and the ladder went on (drain, reset) on the
    real server; now it ends aborted, and --restore gives back the cordon that may have landed.

    The cordon is a local activity of the ladder's first task, which runs on to the first
    rung: the abort, admitted by the server while the cordon is held, was delivered only after
    that task had started the drain (seen in CI: cordon, drain, restore). The task now ends
    before the first rung (``heard``), and the abort is judged first. On the dev server: the
    time-skipping server cannot cancel an activity this young."""
    fleet = own_fleet("abort-early", 1)
    [node] = sorted(fleet.nodes)
    finding = fleet.inject(node, "remap_failure", gpu=2)
    held = fleet.hold("cordon")  # the first task waits here until the server has the abort
    async with running_workers(dev_env.client, fleet) as queues:
        handle = await report(dev_env.client, queues, finding, shipped_runbooks.match(finding))
        await held_entered(held)
        stopping = asyncio.create_task(
            handle.execute_update(
                ABORT_LADDER.name,
                AbortRequest(by="carol", reason="wrong node", restore=True),
                id="abort-early",
                result_type=StopResult,
            )
        )
        await admitted(dev_env.client, handle, "abort-early")
        held.release()  # the cordon lands; the first task goes on to its first rung
        await stopping
        result = await handle.result()
    assert result.outcome is Outcome.ABORTED and "(node restored); held for a person" in (
        result.detail  # restored to service, and still held from automation (person_hold)
    )
    assert not DISRUPTIVE & {action for name, action in fleet.actions if name == node}
    assert not fleet.node(node).unschedulable
