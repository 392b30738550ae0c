"""What an operator types for a workflow to record (``--note``, ``--reason``, a trigger's
reason): remedy's commands refuse a control character, a text over the limit and an empty
abort reason (usage error, exit 1, before connecting), and redact the rest; the wire models
refuse what still holds a secret, since a request's text stays in the history as sent."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from remedy.redaction import MAX_OPERATOR_TEXT, operator_text
from remedy.trust.decisions import AbortRequest, ApproveRequest, ClearRequest
from workers.cli import app

UNREACHABLE = "127.0.0.1:1"  # nothing listens: a command that got past its options says so


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["abort", "n1", "--reason", ""], "empty: say why"),
        (["abort", "n1", "--reason", "   "], "empty: say why"),
        (["abort", "n1", "--reason", "oops\x1b[2Jcleared"], "control character '\\x1b'"),
        (["abort", "n1", "--reason", "vendor\u202eon site"], "bidi control U+202E at 6"),
        (["approve", "n1", "--note", "line one\nline two"], "control character '\\n'"),
        (["clear", "n1", "--reason", "x" * (MAX_OPERATOR_TEXT + 1)], "over the limit of 500"),
        (["trigger", "n1", "--runbook", "gpu-reset-class", "--reason", "a\tb"], "control"),
    ],
)
def test_a_command_refuses_bad_operator_text_before_connecting(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, [*args, "--address", UNREACHABLE])
    assert result.exit_code == 1
    assert said in result.output
    assert "cannot reach" not in result.output


def test_a_command_redacts_what_it_sends() -> None:
    assert operator_text("rotated the db password=hunter2 per INC-7") == (
        "rotated the db password=[REDACTED:secret] per INC-7"
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: AbortRequest(by="sre", reason=""),
        lambda: AbortRequest(by="sre", reason="see https://ops:pw0rd9@10.0.0.4/runbook"),
        lambda: ApproveRequest(by="sre", note="token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"),
        lambda: ClearRequest(by="sre", reason="fixed\nby hand"),
    ],
)
def test_the_wire_refuses_what_a_history_must_not_hold(make: object) -> None:
    with pytest.raises(ValidationError) as refused:
        make()  # type: ignore[operator]
    assert "pw0rd9" not in str(refused.value) and "hf_aBcD" not in str(refused.value)


def test_the_wire_takes_what_remedys_commands_send() -> None:
    reason = operator_text("see https://ops:pw0rd9@10.0.0.4/runbook")
    assert AbortRequest(by="sre", reason=reason).reason == (
        "see https://ops:[REDACTED:url-password]@10.0.0.4/runbook"
    )
