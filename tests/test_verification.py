"""Verification with what saw the fault: a plain probe cannot see a micro-controller halt
(Xid 62) or a GPU that fails only under load, so a rung that did not fix one must not pass as a
recovery. Pure rules first, then ladders on the time-skipping server over the simulated fleet,
where the fault survives every rung but a reset and re-raises its Xid while it is there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.attribution.evidence import RecentXid
from remedy.core.models import Action, Component, ComponentKind, Finding, Severity
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.ladder.verification import VerifyBy, recurrences, verify_by
from remedy.runbook import Match, Runbook, Rung
from tests.ladder import remediate

NODE = "gpu-node-001"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
VERIFIED, UNVERIFIED = AttemptResult.VERIFIED, AttemptResult.UNVERIFIED
GPU1 = Component(kind=ComponentKind.GPU, index=1, serial="SN1")


def finding(check: str, reason: str, xid: int | None = None, gpu: Component = GPU1) -> Finding:
    return Finding(
        node=NODE,
        check=check,
        reason=reason,
        severity=Severity.CRITICAL,
        component=gpu,
        xid=xid,
        observed_at=T0,
    )


def kill_then_reset(name: str, match: Match, watch: timedelta = timedelta(minutes=10)) -> Runbook:
    """A ladder whose first rung cannot fix a halted micro-controller: only the reset does."""
    return Runbook(
        name=name,
        match=[match],
        watch=watch,
        ladder=[Rung(action=Action.KILL_JOB), Rung(action=Action.RESET_GPU)],
    )


# -- the rules ------------------------------------------------------------------------------
def test_each_fault_is_verified_by_what_can_see_it() -> None:
    assert verify_by(finding("memory", "EccUncorrectable")) is VerifyBy.PROBE
    assert verify_by(finding("inventory", "GpuFallenOffBus")) is VerifyBy.PROBE
    assert verify_by(finding("load", "FailsUnderLoad")) is VerifyBy.DIAGNOSE
    assert verify_by(finding("xid", "Xid62", 62)) is VerifyBy.WATCH
    assert verify_by(finding("condition", "Xid79", 79)) is VerifyBy.WATCH  # from a condition
    assert verify_by(finding("manual", "ManualTrigger")) is VerifyBy.PROBE  # nothing better


def test_only_the_same_xid_on_the_same_gpu_after_the_rung_is_a_recurrence() -> None:
    trigger = finding("xid", "Xid62", 62)
    after = T0 + timedelta(minutes=1)
    same = RecentXid(code=62, gpu="SN1", at=after + timedelta(minutes=3))
    seen = [
        same,
        RecentXid(code=62, gpu="SN1", at=T0),  # before the rung ended: the original
        RecentXid(code=62, gpu="SN2", at=after),  # another GPU
        RecentXid(code=13, gpu="SN1", at=after),  # another Xid
    ]
    assert recurrences(trigger, seen, after) == [same]
    # A trigger that names no GPU: the code on any GPU counts (fail closed).
    anywhere = finding("condition", "Xid62", 62, gpu=Component())
    assert len(recurrences(anywhere, seen, after)) == 2
    assert recurrences(finding("memory", "EccUncorrectable"), seen, after) == []


# -- on the ladder --------------------------------------------------------------------------
async def test_an_xid_only_fault_is_not_recovered_by_a_clean_probe(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    # Xid 62: the probe reads nothing wrong, and killing the job leaves the halt in place.
    reported = fleet.inject(NODE, "mcu_halt", gpu=1)
    runbook = kill_then_reset("xid62-kill-then-reset", Match(xids=[62]))
    ran = await remediate(time_env, fleet, reported, runbook)

    assert ran.ladder == [(Action.KILL_JOB, UNVERIFIED), (Action.RESET_GPU, VERIFIED)]
    kill, reset = (a for a in ran.result.attempts if a.rung >= 0)
    assert "Xid 62 on GPU 1" in kill.detail and "again" in kill.detail
    assert "no Xid 62 for 10m" in reset.detail
    assert reset.finished_at - reset.started_at >= timedelta(minutes=10)  # the quiet watch
    assert ran.result.outcome is Outcome.RECOVERED
    assert not fleet.node(NODE).faults  # recovered means the fault is really gone


async def test_a_load_test_fault_is_verified_by_running_the_diagnose_again(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    fleet.inject(NODE, "mcu_halt", gpu=2)  # answers every query, fails under load
    serial = fleet.node(NODE).gpus[2].serial
    gpu2 = Component(kind=ComponentKind.GPU, index=2, serial=serial)
    reported = finding("load", "FailsUnderLoad", gpu=gpu2)
    runbook = kill_then_reset("fails-under-load", Match(checks=["load"]))
    ran = await remediate(time_env, fleet, reported, runbook)

    assert ran.ladder == [(Action.KILL_JOB, UNVERIFIED), (Action.RESET_GPU, VERIFIED)]
    kill, reset = (a for a in ran.result.attempts if a.rung >= 0)
    assert "probe clean; diagnose failed" in kill.detail and "GPU 2" in kill.detail
    assert "diagnose passed" in reset.detail
    assert ran.result.outcome is Outcome.RECOVERED
    assert not fleet.node(NODE).faults
