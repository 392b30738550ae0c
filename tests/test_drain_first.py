"""A rung that needs the node drained (reset, reboot, replace) never runs after a failed drain
unless the runbook or a person says so: the drain is tried once more, then ``if_drain_failed``
— ask (the default), stop, or force. A node-level one with no node drain before it drains the
node first, unless its ``if_not_drained`` says force."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import APPROVE_RUNG
from remedy.core.errors import DrainBlocked, TransientError
from remedy.core.models import Action
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.runbook.authored import IfDrainFailed
from remedy.runbook.undrained import IfNotDrained
from remedy.trust.decisions import ApproveRequest
from tests.conftest import running_workers
from tests.ladder import remediate, report, wait_for_phase
from tests.servers import finished

NODE = "gpu-node-001"
DONE, FAILED, VERIFIED = AttemptResult.DONE, AttemptResult.FAILED, AttemptResult.VERIFIED
BLOCKED = DrainBlocked("a PodDisruptionBudget forbids the eviction")


def drain_then_reboot(if_drain_failed: IfDrainFailed = IfDrainFailed.ASK) -> Runbook:
    return Runbook(
        name="drain-then-reboot",
        match=[Match(xids=[79])],
        ladder=[
            Rung(action=Action.DRAIN, timeout=timedelta(minutes=5)),
            Rung(
                action=Action.REBOOT,
                approval_timeout=timedelta(hours=1),
                if_drain_failed=if_drain_failed,
            ),
        ],
    )


async def test_a_person_may_let_a_rung_run_on_the_undrained_node(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    fleet.break_action("drain", BLOCKED)
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, drain_then_reboot())
        waiting = await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        assert "reboot" not in [a for _, a in fleet.actions]  # nothing ran while it asked
        assert waiting.rung == 1
        approved = await APPROVE_RUNG.execute(handle, ApproveRequest(by="alice", note="ok"))
        result = await finished(time_env, handle)
    assert approved.rung == 1 and approved.action is Action.REBOOT
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, FAILED), (Action.DRAIN, FAILED), (Action.REBOOT, VERIFIED)]
    assert "ran on an undrained node, approved by alice" in result.attempts[-2].detail
    assert result.outcome is Outcome.RECOVERED


@pytest.mark.parametrize(
    ("mode", "outcome", "rebooted"),
    [
        (IfDrainFailed.ASK, Outcome.NEEDS_HUMAN, False),  # nobody approved within the hour
        (IfDrainFailed.STOP, Outcome.NEEDS_HUMAN, False),
        (IfDrainFailed.FORCE, Outcome.RECOVERED, True),
    ],
)
async def test_what_a_rung_does_after_a_failed_drain(
    time_env: WorkflowEnvironment,
    fleet: SimFleet,
    mode: IfDrainFailed,
    outcome: Outcome,
    rebooted: bool,
) -> None:
    fleet.break_action("drain", BLOCKED)
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, drain_then_reboot(mode))
        result = await finished(time_env, handle)
    assert result.outcome is outcome, result.detail
    assert ("reboot" in [a for _, a in fleet.actions]) is rebooted
    assert fleet.node(NODE).unschedulable is not rebooted  # held cordoned for the person
    if mode is IfDrainFailed.FORCE:
        assert "if_drain_failed: force" in result.attempts[-2].detail


async def test_a_drain_that_works_the_second_time_lets_the_rung_run(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    fleet.fail_next("drain", TransientError("API server unavailable"), times=3)  # the rung's 3
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, drain_then_reboot())
        result = await finished(time_env, handle)
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, FAILED), (Action.DRAIN, DONE), (Action.REBOOT, VERIFIED)]
    assert [a for _, a in fleet.actions] == ["cordon", "drain", "reboot", "restore"]
    assert result.outcome is Outcome.RECOVERED


def reboot_only(**rung: Any) -> Runbook:
    return Runbook(
        name="reboot-only",
        match=[Match(xids=[79])],
        ladder=[Rung(action=Action.REBOOT, **rung)],
    )


async def test_a_node_level_rung_with_no_drain_before_it_drains_the_node_first(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    ran = await remediate(time_env, fleet, finding, reboot_only())
    assert [a for _, a in fleet.actions] == ["cordon", "drain", "reboot", "restore"]
    assert ran.ladder == [(Action.DRAIN, DONE), (Action.REBOOT, VERIFIED)]
    assert ran.result.attempts[1].rung == 0  # under the reboot's rung, which asked for it
    assert ran.result.outcome is Outcome.RECOVERED


async def test_if_not_drained_force_runs_it_on_the_node_as_it_is_and_says_so(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    ran = await remediate(time_env, fleet, finding, reboot_only(if_not_drained=IfNotDrained.FORCE))
    assert [a for _, a in fleet.actions] == ["cordon", "reboot", "restore"]
    assert "ran on an undrained node (no node drain before it; if_not_drained: force)" in (
        ran.result.attempts[-2].detail
    )


async def test_a_drain_first_that_fails_is_a_failed_drain(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """What ``if_drain_failed`` says applies to it too (here: stop, the node held)."""
    fleet.break_action("drain", BLOCKED)
    finding = fleet.inject(NODE, "gpu_lost", gpu=3)
    ran = await remediate(time_env, fleet, finding, reboot_only(if_drain_failed=IfDrainFailed.STOP))
    assert ran.ladder == [(Action.DRAIN, FAILED)]
    assert "reboot" not in [a for _, a in fleet.actions]
    assert ran.result.outcome is Outcome.NEEDS_HUMAN and fleet.node(NODE).unschedulable


async def test_a_reset_after_the_jobs_pods_were_killed_needs_no_drain(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """A node-wide reset needs the GPUs free, which a killed job leaves them (hung-job)."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=3)
    runbook = Runbook(
        name="kill-then-reset",
        match=[Match(xids=[48])],
        ladder=[Rung(action=Action.KILL_JOB), Rung(action=Action.RESET_GPU)],
    )
    ran = await remediate(time_env, fleet, finding, runbook)
    assert [a for _, a in fleet.actions] == ["cordon", "kill_job", "reset_gpu", "restore"]
    assert ran.result.outcome is Outcome.RECOVERED
