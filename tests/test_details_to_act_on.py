"""The Web UI's details of a ladder, as a person on call reads them: rungs counted from 1,
absolute times beside relative ones, the approve command only while an approval waits, the
fault that drives the ladder in the heading, a list this UI renders, the restore phase named.
Pure: the details are a function of the state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from remedy.core.models import Action, Component, ComponentKind, Finding, NodeRef, Severity
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import Attempt, AttemptResult, Escalation, Phase, RemediationState
from remedy.runbook import Match, Runbook, Rung
from workers.show import NodeLadder, timeline

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
RUNBOOK = Runbook(
    name="reset-then-replace",
    match=Match(xids=[62]),
    ladder=[
        Rung(action=Action.DRAIN),
        Rung(action=Action.RESET_GPU),
        Rung(action=Action.REPLACE, approval="required", approval_timeout=timedelta(hours=8)),
    ],
)


def finding(xid: int | None, gpu: int, reason: str = "") -> Finding:
    return Finding(
        node="gpu-7",
        check="xid" if xid else "memory",
        reason=reason or f"Xid{xid}",
        severity=Severity.CRITICAL,
        component=Component(kind=ComponentKind.GPU, index=gpu),
        xid=xid,
        observed_at=AT,
    )


def ladder(phase: Phase, rung: int, **more: object) -> RemediationState:
    return RemediationState(
        node=NodeRef(name="gpu-7", pool="p"),
        runbook=RUNBOOK,
        trigger=finding(62, 6),
        phase=phase,
        phase_since=AT,
        rung=rung,
        **more,  # type: ignore[arg-type]
    )


def test_an_approval_names_its_rung_from_1_and_its_deadline_as_a_time() -> None:
    details = remediation_details(ladder(Phase.AWAITING_APPROVAL, 2))
    assert "**Rung** 3 of 3: replace" in details
    assert "since 2026-11-30 03:00:00 UTC" in details
    assert "times out at 2026-11-30 11:00:00 UTC, 8h after it was asked" in details
    assert "**Approve** `remedy approve gpu-7`" in details


def test_a_ladder_waiting_for_a_lease_offers_no_approve_command() -> None:
    details = remediation_details(ladder(Phase.AWAITING_LEASE, 1))
    assert "remedy approve" not in details
    assert '**Abort** `remedy abort gpu-7 --reason "..."`' in details


def test_the_heading_names_the_fault_that_drives_the_ladder_and_the_one_it_began_with() -> None:
    remap = finding(None, 0, "RowRemapFailure")
    went_on = Escalation(
        at=AT,
        from_runbook="gpu-reset-class",
        to_runbook=RUNBOOK.name,
        because=remap.headline(),
        kind="continued",
        from_fault=finding(62, 6).headline(),
    )
    state = ladder(Phase.ACTING, 1, escalations=[went_on])
    state.trigger = remap
    heading = remediation_details(state).splitlines()[0]
    assert heading == "### gpu-7: RowRemapFailure on GPU 0 (the ladder began with Xid 62 on GPU 6)"
    assert remediation_details(ladder(Phase.ACTING, 1)).splitlines()[0] == (
        "### gpu-7: Xid 62 on GPU 6"
    )


def test_the_ladder_so_far_is_a_list_with_whole_words_and_rungs_from_1() -> None:
    long = "reset GPU 6; " + "the verification probe still saw the fault " * 6
    attempts = [
        Attempt(rung=-1, action=Action.CORDON, started_at=AT, finished_at=AT, result="done"),
        Attempt(
            rung=1,
            action=Action.RESET_GPU,
            started_at=AT,
            finished_at=AT,
            result=AttemptResult.UNVERIFIED,
            detail=long,
        ),
    ]
    details = remediation_details(ladder(Phase.ACTING, 2, attempts=attempts))
    *rows, now = details.splitlines()[-3:]
    assert now == "- **rung 3 replace**: acting since 2026-11-30 03:00:00 UTC"  # under way
    assert rows[0].startswith("- **cordon**: done at 2026-11-30 03:00:00 UTC — ")
    assert rows[1].startswith("- **rung 2 reset_gpu**: unverified at 2026-11-30 03:00:00 UTC — ")
    cut = rows[1].removesuffix(" …")
    assert cut != rows[1] and cut.split()[-1] in long.split()  # cut between words
    assert "|" not in details  # no table: this UI runs its cells together


def test_the_restore_phase_is_named_as_such() -> None:
    details = remediation_details(ladder(Phase.RESTORING, 1))
    assert "**phase** restoring (giving the node back; the ladder ends after it)" in details
    assert "**Rung** none: past the ladder (3 rungs), restoring the node" in details
    assert "**Next** restore the node (uncordon, return its GPUs); then the ladder ends" in details


def test_show_says_since_when_and_until_when_beside_how_long() -> None:
    shown = timeline(
        NodeLadder(
            node="gpu-7",
            runbook=RUNBOOK.name,
            status="awaiting_approval",
            since=AT,
            deadline=AT + timedelta(hours=8),
            read_at=AT + timedelta(minutes=5),
        )
    )
    assert shown[0] == (
        "gpu-7: awaiting_approval — runbook reset-then-replace; since 2026-11-30 03:00:00 UTC "
        "(5m ago); approval times out at 2026-11-30 11:00:00 UTC (in 7h55m)"
    )
