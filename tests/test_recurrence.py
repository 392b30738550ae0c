"""Recurrence: a fault back on the same GPU soon after a recovery resumes the ladder above the
rung that "recovered" it, from the GPU's hardware record. The pure rule, then two ladders in a
row on the time-skipping server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.core.models import Action
from remedy.ladder.hardware import Incident
from remedy.ladder.recurrence import resume_rung
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import Queues, running_workers
from tests.ladder import Ran, report, state_of
from tests.servers import finished
from workflows.node_remediation import NodeRemediation

NODE = "gpu-node-002"
T0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
DONE, VERIFIED = AttemptResult.DONE, AttemptResult.VERIFIED
DRAIN_RESET_REBOOT = Runbook(
    name="xid62-drain-reset-reboot",
    match=[Match(xids=[62])],
    recurrence_window=timedelta(hours=24),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU), Rung(action=Action.REBOOT)],
)


def recovered(at: datetime, rung: int, runbook: str = DRAIN_RESET_REBOOT.name) -> Incident:
    return Incident(
        at=at,
        node=NODE,
        fault="Xid 62 on GPU 1 (SN1)",
        outcome="recovered",
        source=f"node-remediation/{NODE}/{at:%H%M}",
        runbook=runbook,
        rung=rung,
        action="reset_gpu",
    )


# -- the rule -------------------------------------------------------------------------------
def test_a_fault_back_within_the_window_resumes_above_the_rung_that_recovered_it() -> None:
    resume = resume_rung(DRAIN_RESET_REBOOT, [recovered(T0, rung=1)], T0 + timedelta(hours=6))
    assert resume is not None and resume.rung == 2
    assert resume.prepare == [0]  # the drain first: the node took work again since
    assert "resuming at reboot" in resume.describe(DRAIN_RESET_REBOOT)


def test_outside_the_window_or_for_another_ladder_it_starts_from_the_bottom() -> None:
    later = T0 + timedelta(hours=25)
    assert resume_rung(DRAIN_RESET_REBOOT, [recovered(T0, rung=1)], later) is None
    other = recovered(T0, rung=0, runbook="gpu-reset-class")  # its rung numbers another ladder
    assert resume_rung(DRAIN_RESET_REBOOT, [other], T0 + timedelta(hours=1)) is None
    needs_human = recovered(T0, rung=1).model_copy(update={"outcome": "needs_human"})
    assert resume_rung(DRAIN_RESET_REBOOT, [needs_human], T0 + timedelta(hours=1)) is None
    off = DRAIN_RESET_REBOOT.model_copy(update={"recurrence_window": timedelta(0)})
    assert resume_rung(off, [recovered(T0, rung=1)], T0 + timedelta(hours=1)) is None


def test_the_latest_recovery_counts_and_past_the_last_rung_is_a_human() -> None:
    incidents = [recovered(T0, rung=1), recovered(T0 + timedelta(hours=2), rung=2)]
    resume = resume_rung(DRAIN_RESET_REBOOT, incidents, T0 + timedelta(hours=3))
    assert resume is not None and resume.rung == 3  # the reboot did not hold either
    assert resume.prepare == []  # nothing left to climb: nothing to clear the node for
    assert "nothing: a human" in resume.describe(DRAIN_RESET_REBOOT)


# -- on the ladder --------------------------------------------------------------------------
async def ladder(env: WorkflowEnvironment, fleet: SimFleet, client: Client, q: Queues) -> Ran:
    """Xid 62 on GPU 1 (again), and the ladder it gets."""
    handle = await report(client, q, fleet.inject(NODE, "mcu_halt", gpu=1), DRAIN_RESET_REBOOT)
    result = await finished(env, handle)  # not result(): the clock could skip 10 years after
    run = client.get_workflow_handle_for(
        NodeRemediation.run, handle.id, run_id=handle.result_run_id
    )
    return Ran(result, await state_of(run))  # this run's: the record may start the next one


async def test_a_recurrence_resumes_above_the_failed_rung_and_an_old_one_starts_over(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    client = time_env.client
    async with running_workers(client, fleet) as queues:
        first = await ladder(time_env, fleet, client, queues)
        assert first.result.outcome is Outcome.RECOVERED
        assert first.ladder == [(Action.DRAIN, DONE), (Action.RESET_GPU, VERIFIED)]

        # A day and more later: a new fault, from the bottom.
        await time_env.sleep(timedelta(hours=25))
        second = await ladder(time_env, fleet, client, queues)
        assert second.ladder == [(Action.DRAIN, DONE), (Action.RESET_GPU, VERIFIED)]
        assert not second.state.resumed

        # Back within hours of that recovery: the reset did not hold, so on to the reboot —
        # after draining again (jobs landed on the node since it was given back).
        await time_env.sleep(timedelta(hours=2))
        third = await ladder(time_env, fleet, client, queues)
        assert third.ladder == [(Action.DRAIN, DONE), (Action.REBOOT, VERIFIED)]
        assert third.result.outcome is Outcome.RECOVERED
        assert "recovery by reset_gpu" in third.state.resumed
        assert "resuming at reboot" in third.state.resumed
