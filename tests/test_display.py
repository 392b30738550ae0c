"""Invisible characters in what remedy shows people: a node's text (a finding's evidence, a
tool's output) may hold a bidi override that reverses what is printed after it; `remedy show`,
the Web UI's details and the status tables write each one out as its code point. An operator's
note with one is refused where it enters a workflow."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from remedy.core.display import visible
from remedy.core.models import Action, Component, ComponentKind, Finding, NodeRef, Severity
from remedy.ladder.describe import remediation_details, static_summary
from remedy.ladder.remediation import Attempt, AttemptResult, Phase, RemediationState
from remedy.redaction import operator_text
from remedy.runbook import Match, Runbook
from remedy.trust.decisions import AbortRequest, ApproveRequest
from workers.show import NodeLadder, timeline
from workers.tables import plain

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "ok \u202edeliaf" reads "ok failed" reversed
EVIDENCE = f"memory: row remap ok {RLO}deliaf"


def finding() -> Finding:
    return Finding(
        node="gpu-7",
        check="memory",
        reason="RowRemapFailure",
        severity=Severity.CRITICAL,
        component=Component(kind=ComponentKind.GPU, index=3),
        evidence=EVIDENCE,
        observed_at=AT,
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain ascii, kept", "plain ascii, kept"),
        ("ünïcode · — … kept", "ünïcode · — … kept"),
        (f"a{RLO}b", "a<U+202E>b"),
        ("\u2066x\u2069 \u200fy\u200e \u061c", "<U+2066>x<U+2069> <U+200F>y<U+200E> <U+061C>"),
        ("zero\u200bwidth\ufeff", "zero<U+200B>width<U+FEFF>"),
        ("esc\x1b[2J line\nnext\ttab", "esc<U+001B>[2J line\nnext\ttab"),
    ],
)
def test_visible_writes_out_each_invisible_character(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_the_web_uis_details_show_a_bidi_override_in_the_evidence() -> None:
    state = RemediationState(
        node=NodeRef(name="gpu-7", pool="p"),
        runbook=Runbook(name="remap", match=[Match(checks=["memory"])], ladder=[]),
        trigger=finding(),
        phase=Phase.ACTING,
        phase_since=AT,
    )
    details = remediation_details(state)
    assert "**Evidence** memory: row remap ok <U+202E>deliaf" in details
    assert RLO not in details
    assert state.trigger is not None and state.trigger.evidence == EVIDENCE  # stored as it came


def test_the_workflow_lists_line_writes_out_one_in_a_device_name() -> None:
    runbook = Runbook(name="nic", match=[Match(checks=["nic"])], ladder=[])
    nic = finding().model_copy(
        update={"component": Component(kind=ComponentKind.NIC, device=f"ib{RLO}0")}
    )
    assert static_summary("gpu-7", nic, runbook).startswith(
        "gpu-7: RowRemapFailure on NIC ib<U+202E>0"
    )


def test_show_writes_out_a_bidi_override_that_a_node_said() -> None:
    said = f"still unhealthy: {finding().headline()}: {finding().evidence}"
    attempt = Attempt(
        rung=0,
        action=Action.RESET_GPU,
        started_at=AT,
        finished_at=AT,
        result=AttemptResult.FAILED,
        detail=said,
    )
    lines = timeline(
        NodeLadder(node="gpu-7", runbook="remap", status="failed", attempts=[attempt], detail=said)
    )
    assert lines[1].endswith("RowRemapFailure on GPU 3: memory: row remap ok <U+202E>deliaf")
    assert lines[-1] == f"    {visible(said)}"
    assert not any(RLO in line for line in lines)


def test_a_status_table_writes_out_a_bidi_override_in_a_cell() -> None:
    assert plain(["node", "fault"], [["gpu-7", f"x{RLO}y"]])[1] == "gpu-7  x<U+202E>y"


@pytest.mark.parametrize("char", ["\u202e", "\u2066", "\u200f", "\u061c"])
def test_an_operators_note_with_a_bidi_control_is_refused(char: str) -> None:
    note = f"replaced the PSU {char}ok"
    with pytest.raises(ValidationError) as refused:
        ApproveRequest(by="sre", note=note)
    assert f"bidi control U+{ord(char):04X} at 17" in str(refused.value)
    with pytest.raises(ValidationError):
        AbortRequest(by="sre", reason=note)
    with pytest.raises(ValueError, match=f"bidi control U\\+{ord(char):04X} at 17"):
        operator_text(note)  # remedy's commands refuse it before they send it
