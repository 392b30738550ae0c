"""What a running ladder is doing and what waits behind it, as `remedy show` and the Web UI's
details say it: the rung being settled or verified and how, each fault waiting its turn with
what its runbook does first and when it comes, the summary honest about being the start, and
the budget naming the nodes held for a human. Pure: functions of the state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from remedy.core.models import (
    Action,
    Component,
    ComponentKind,
    CordonState,
    Finding,
    NodeRef,
    Severity,
)
from remedy.disruption.budget import BudgetState
from remedy.disruption.budget_messages import HumanHold
from remedy.disruption.budget_view import budget_details
from remedy.ladder.describe import remediation_details, static_summary
from remedy.ladder.remediation import Attempt, AttemptResult, FindingReport, Phase, RemediationState
from remedy.ladder.under_way import under_way, waiting
from remedy.runbook import Match, Runbook, Rung
from workers.show import NodeLadder, timeline

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
REBOOTS = Runbook(
    name="gpu-fallen-off-bus",
    match=Match(xids=[79]),
    ladder=[
        Rung(action=Action.DRAIN),
        Rung(action=Action.REBOOT, settle=timedelta(minutes=2)),
        Rung(action=Action.REPLACE, approval="required"),
    ],
)
RESETS = Runbook(
    name="gpu-row-remap-failure",
    match=Match(checks=["memory"]),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
)


def finding(gpu: int, xid: int | None = None, severity: Severity = Severity.CRITICAL) -> Finding:
    return Finding(
        node="gpu-7",
        check="xid" if xid else "memory",
        reason=f"Xid{xid}" if xid else "RowRemapFailure",
        severity=severity,
        component=Component(kind=ComponentKind.GPU, index=gpu),
        xid=xid,
        observed_at=AT,
    )


def rebooting(phase: Phase, **more: object) -> RemediationState:
    drained = Attempt(
        rung=0,
        action=Action.DRAIN,
        started_at=AT,
        finished_at=AT,
        result=AttemptResult.DONE,
        detail="evicted 3 pods",
    )
    fields: dict[str, object] = {"attempts": [drained], "cordon": CordonState.CORDONED, **more}
    return RemediationState(
        node=NodeRef(name="gpu-7", pool="p"),
        runbook=REBOOTS,
        trigger=finding(6, xid=79),
        phase=phase,
        phase_since=AT + timedelta(minutes=5),
        rung=1,
        **fields,  # type: ignore[arg-type]
    )


def test_the_rung_being_verified_is_shown_with_how() -> None:
    state = rebooting(Phase.VERIFYING)
    how = "a probe, a 10m watch for no Xid 79 on GPU 6, then a probe"
    now = under_way(state)
    assert now is not None and now.describe() == f"rung 2 of 3 reboot, verifying: {how}"
    details = remediation_details(state)
    assert f"- **rung 2 reboot**: verifying since 2026-11-30 03:05:00 UTC — {how}" in details
    assert f"**Next** verification of reboot: {how}" in details
    row = timeline(NodeLadder(node="gpu-7", runbook=REBOOTS.name, status="verifying", now=now))
    assert row[-1] == f"  2 03:05:00 reboot     verifying                  {how}"
    settling = under_way(rebooting(Phase.SETTLING))
    assert settling is not None and settling.how == f"2m to settle, then {how}"


def test_no_rung_is_under_way_before_the_ladder_climbs_or_once_it_ended() -> None:
    assert under_way(rebooting(Phase.TOLERATING)) is None
    assert under_way(rebooting(Phase.RESTORING)) is None
    assert "**Ladder so far**" not in remediation_details(rebooting(Phase.TOLERATING, attempts=[]))


def test_each_fault_waiting_its_turn_says_what_it_will_do_and_when() -> None:
    """Another GPU's remap failure, kept: its runbook starts past the drain already done and
    comes after the trigger; a fault only the verification saw is matched at its turn."""
    remap = FindingReport(finding=finding(0), runbook=RESETS)
    seen = finding(3, xid=48)
    state = rebooting(Phase.ACTING, pending=[remap], elsewhere=[seen, finding(6, xid=79)])
    said = [w.describe() for w in waiting(state)]
    assert said == [
        "RowRemapFailure on GPU 0 → gpu-row-remap-failure: reset_gpu (rung 2 of 2: the rungs "
        "below are done); after Xid 79 on GPU 6 is verified gone",
        "Xid 48 on GPU 3: its runbook is matched when its turn comes; seen by the last "
        "verification; after Xid 79 on GPU 6 is verified gone",
    ]
    details = remediation_details(state)
    assert "**Waiting their turn**\n\n- " + said[0] + "\n- " + said[1] in details
    assert "handled after this fault" not in details
    shown = timeline(
        NodeLadder(node="gpu-7", runbook=REBOOTS.name, status="acting", waiting=waiting(state))
    )
    assert shown[1:] == [f"  > waiting: {s}" for s in said]


def test_a_worse_fault_waiting_says_it_takes_over_and_cordons() -> None:
    app = RemediationState(
        node=NodeRef(name="gpu-7", pool="p"),
        runbook=Runbook(
            name="application-xid",
            match=Match(xids=[13]),
            cordon=False,
            ladder=[Rung(action=Action.DIAGNOSE)],
        ),
        trigger=finding(6, xid=13, severity=Severity.WARNING),
        phase=Phase.VERIFYING,
        pending=[FindingReport(finding=finding(6, xid=79), runbook=REBOOTS)],
    )
    [worse] = waiting(app)
    assert worse.describe() == (
        "Xid 79 on GPU 6 → gpu-fallen-off-bus: cordon, then drain (rung 1 of 3); worse than "
        "Xid 13 on GPU 6: takes over before the next rung"
    )
    assert waiting(app.model_copy(update={"phase": Phase.DONE})) == []


def test_the_summary_says_it_is_the_start_and_the_budget_names_who_is_held() -> None:
    """The server keeps the summary of the start only: after an escalation it must not pass
    for the runbook now. "4 held for a human" named no node."""
    line = static_summary("gpu-7", finding(6, xid=13), REBOOTS)
    assert (
        line == "gpu-7: Xid 13 on GPU 6 → gpu-fallen-off-bus (drain, reboot, replace), as it began"
    )
    held = [HumanHold(node=f"gpu-{i}", since=AT) for i in range(12)]
    pool = BudgetState(pool="a", pool_size=20, held=held[:4])
    assert "4 held for a human (gpu-0, gpu-1, gpu-2, gpu-3)" in budget_details(pool)
    many = BudgetState(pool="a", pool_size=20, held=held)
    assert "12 held for a human (gpu-0, gpu-1, " in budget_details(many)
    assert "gpu-9 and 2 more)" in budget_details(many)
