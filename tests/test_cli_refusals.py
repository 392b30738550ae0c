"""Commands that say when they would do nothing, checked before anything connects: a
`remedy status --state` no node can be in."""

from __future__ import annotations

from typer.testing import CliRunner

from workers.cli import app
from workers.status import NODE_STATES, NodeFilter, NodeRow, why_not_state

NOWHERE = "127.0.0.1:1"  # nothing listens: a command that connected would say so instead


def test_a_state_no_node_can_be_in_is_refused_with_the_states() -> None:
    result = CliRunner().invoke(app, ["status", "--state", "bogus", "--address", NOWHERE])
    assert result.exit_code == 1  # bad input
    [line] = result.output.splitlines()
    assert line.startswith("error: --state 'bogus' matches no node state; use one of: ")
    for state in ("tolerating", "needs_human", "admission: diagnosing", "starting"):
        assert state in line


def test_a_word_of_a_state_is_a_choice_as_stored_and_as_the_table_shows_it() -> None:
    assert all(why_not_state(word) == "" for word in ("waiting", "needs human", "admission"))
    assert why_not_state("tolerating") == "" and "tolerating" in NODE_STATES
    row = NodeRow(node="n1", pool="p", state="needs_human")
    assert NodeFilter(state="needs human").keeps(row)
    assert not NodeFilter(state="tolerating").keeps(row)
