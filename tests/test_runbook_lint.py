"""`remedy runbooks validate` warns (exit 0, or 1 with --strict) about runbooks that load but
probably do not do what was meant: a disruptive rung without approval for a fault that passes
by itself, an empty ladder that does next to nothing, matches that overlap, and a node-level
rung forced on an undrained node. Each warning names file, line and field as a loading error
does (remedy/runbook/lint.py)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from remedy.runbook.lint import lint
from remedy.runbook.loader import load_runbook_sources
from tests.conftest import ROOT
from workers.cli import app

HOT = """name: hot
match:
  checks: [thermal]
ladder:
  - action: drain
    approval: required
  - action: replace
"""


def warnings(tmp_path: Path, **files: str) -> list[str]:
    """The warnings about these runbooks alone (a folder of their own), files named as in it."""
    folder = tmp_path / f"set{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text)
    return [str(w).replace(f"{folder}/", "") for w in lint(load_runbook_sources([folder]))]


def validate(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["runbooks", "validate", *args])
    return result.exit_code, result.output.splitlines()


def test_a_disruptive_rung_without_approval_on_a_transient_check_is_warned(
    tmp_path: Path,
) -> None:
    (tmp_path / "hot.yaml").write_text(HOT)
    code, lines = validate(str(tmp_path))
    strict = validate(str(tmp_path), "--strict")
    assert code == 0
    assert lines == [  # the drain waits for a person: only the replace is warned
        "ok  hot: drain → replace",
        f"warning: {tmp_path}/hot.yaml:7: ladder[1]: replace is disruptive and needs no "
        "approval, yet the runbook acts at once (tolerance 0s) on thermal (clock slowdowns and "
        "temperature), whose faults often pass by themselves: add `approval: required`, or a "
        "tolerance window the fault must outlast",
    ]
    assert strict == (1, [*lines, "1 warnings (--strict)"])


def test_a_tolerance_window_or_an_approval_answers_a_transient_fault(tmp_path: Path) -> None:
    tolerated = HOT.replace("ladder:", "tolerance: 10m\nladder:")
    approved = HOT + "    approval: required\n"
    lasting = HOT.replace("[thermal]", "[memory]")
    assert warnings(tmp_path, hot=tolerated) == []
    assert warnings(tmp_path, hot=approved) == []
    assert warnings(tmp_path, hot=lasting) == []


def test_an_empty_ladder_that_does_next_to_nothing_is_warned(tmp_path: Path) -> None:
    empty = "name: empty\nmatch: {xids: [13]}\nladder: []\n"
    assert warnings(tmp_path, empty=empty) == [
        "empty.yaml:3: ladder: empty, and no tolerance window: a finding it matches cordons the "
        "node for a person and remedy never looks at it again (add a rung, or a window whose "
        "re-probe gives a healthy node back)"
    ]
    uncordoned = "name: empty\nmatch: {xids: [13]}\ncordon: false\n"  # no ladder written
    [said] = warnings(tmp_path, empty=uncordoned)
    assert said.startswith("empty.yaml:1: ladder: empty, and no cordon: ")
    looks_again = "name: empty\nmatch: {xids: [13]}\ntolerance: 1m\nladder: []\n"
    assert warnings(tmp_path, empty=looks_again) == []  # orphaned-cordon's shape


def test_overlapping_matches_name_both_runbooks_and_the_one_that_wins(tmp_path: Path) -> None:
    """The module's worked example."""
    bus = "name: {}\nmatch: {{xids: [79]}}\nladder:\n  - action: reboot\n"
    c = "name: c\nmatch: {checks: [xid], reasons: [Xid79]}\nladder:\n  - action: reboot\n"
    assert warnings(tmp_path, a=bus.format("a"), b=bus.format("b"), c=c) == [
        "b.yaml:2: match[0]: runbook b overlaps runbook a (a.yaml:2 match[0]) "
        "at the same specificity for Xid 79 (reboot): a wins (same priority, so the name "
        "first in order)",
        "c.yaml:2: match[0]: runbook c never takes a finding by this clause: every one it "
        "matches (Xid 79 (reboot)) goes to a more specific match of a (a.yaml:2 match[0])",
    ]
    ranked = bus.format("b").replace("ladder:", "priority: 5\nladder:")
    [said] = warnings(tmp_path, b=ranked, c=bus.format("c"))
    assert said == (
        "c.yaml:2: match[0]: runbook c overlaps runbook b (b.yaml:2 match[0]) at the same "
        "specificity for Xid 79 (reboot): b wins (priority 5 over 0)"
    )


def test_shipped_runbooks_validate_clean_even_strictly() -> None:
    code, lines = validate(str(ROOT / "runbooks"), "--strict")
    assert code == 0, lines
    assert not [line for line in lines if not line.startswith("ok  ")]


FORCED = """name: forced
match: {xids: [79]}
ladder:
  - action: drain
    scope: gpu
  - action: reboot
    if_not_drained: force
"""


def test_a_node_level_rung_forced_on_an_undrained_node_is_warned(tmp_path: Path) -> None:
    (tmp_path / "forced.yaml").write_text(FORCED)
    code, lines = validate(str(tmp_path), "--strict")
    assert (code, lines[1:]) == (
        1,
        [
            f"warning: {tmp_path}/forced.yaml:7: ladder[1].if_not_drained: reboot runs on the "
            "node as it is, with its pods on it: no node drain comes before it, and force skips "
            "the one the ladder would run first (drop it, or add a drain rung)",
            "1 warnings (--strict)",
        ],
    )
    drained = FORCED.replace("    scope: gpu\n", "")
    assert warnings(tmp_path, forced=drained) == [
        "forced.yaml:6: ladder[1].if_not_drained: force does nothing here: the node is drained at "
        "ladder[0], before reboot"
    ]


def test_if_not_drained_is_only_for_node_level_rungs_that_need_a_drain(tmp_path: Path) -> None:
    scoped = FORCED.replace("  - action: reboot\n", "  - action: reset_gpu\n    scope: gpu\n")
    (tmp_path / "scoped.yaml").write_text(scoped)
    code, lines = validate(str(tmp_path))
    assert code == 1
    assert "if_not_drained is for the node-level rungs that need the node drained" in "\n".join(
        lines
    )
