"""Hostile YAML (an alias bomb, a huge file, deep nesting) is one clear problem, fast, and loads
nothing — for runbooks, the attribution rules and the Xid catalog alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from remedy.attribution.rules import RulesError, load_rules
from remedy.core.yaml_source import MAX_BYTES, MAX_DEPTH, MAX_VALUES, YamlSyntaxError, parse_yaml
from remedy.runbook import RunbookError, load_runbooks
from remedy.xid.catalog import CatalogError, load_catalog
from tests.processes import Children

REMEDY = str(Path(sys.executable).parent / "remedy")
GOOD = "name: good\nmatch: {xids: [48]}\nladder:\n  - action: reset_gpu\n"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """Billion laughs: 9 levels of 9 aliases each are 9**9 (387 million) values."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "runbook.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def only_problem(path: Path) -> str:
    with pytest.raises(RunbookError) as caught:
        load_runbooks([path])
    [problem] = [str(p) for p in caught.value.problems]
    return problem


def test_an_alias_bomb_is_one_problem(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + alias_bomb())
    problem = only_problem(path)
    assert problem.startswith(f"{path}:"), problem
    assert f": -: too many aliases: 72 aliases expand to more than {MAX_VALUES} values" in problem


def test_a_file_over_the_size_limit_is_one_problem_and_is_not_parsed(tmp_path: Path) -> None:
    size = MAX_BYTES + 1000
    path = write(tmp_path, GOOD + "#" * (size - len(GOOD) - 1) + "\n")
    assert only_problem(path) == f"{path}:1: -: too large ({size} bytes, the limit is {MAX_BYTES})"


def test_deep_nesting_is_refused_before_the_parser_recurses(tmp_path: Path) -> None:
    path = write(tmp_path, "name: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert only_problem(path) == (
        f"{path}:1: -: nested too deep (more than {MAX_DEPTH} levels, the limit is {MAX_DEPTH})"
    )


def test_aliases_cannot_nest_deeper_than_the_text_does() -> None:
    chain = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 2 * MAX_DEPTH)]
    with pytest.raises(YamlSyntaxError, match="nested too deep"):
        parse_yaml("\n".join(chain))


def test_what_runbooks_use_is_far_inside_the_limits(tmp_path: Path) -> None:
    """Anchors, a few hundred values and some nesting are fine: the limits are for attacks."""
    ladder = "\n".join(f"  - {{action: reset_gpu, timeout: {i + 1}m}}" for i in range(300))
    text = (
        "name: big\nmatch:\n  - &ecc {xids: [48, 95]}\n  - *ecc\n"
        f"description: {'x' * 10_000}\nladder:\n{ladder}\n"
    )
    [runbook] = load_runbooks([write(tmp_path, text)])
    assert len(runbook.ladder) == 300 and len(runbook.match) == 2
    deep = "a: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    assert parse_yaml(deep).data is not None


def test_attribution_rules_read_through_the_same_limits(tmp_path: Path) -> None:
    path = write(tmp_path, "window: 10m\n" + alias_bomb(), "rules.yaml")
    with pytest.raises(RulesError) as caught:
        load_rules(path)
    assert str(caught.value).startswith(f"{path}:")
    assert "too many aliases" in str(caught.value) and "\n" not in str(caught.value)


def test_the_xid_catalog_reads_through_the_same_limits(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="too many aliases"):
        load_catalog(write(tmp_path, alias_bomb(), "catalog.yaml"))
    with pytest.raises(CatalogError, match="too large"):
        load_catalog(write(tmp_path, "#" * (MAX_BYTES + 1), "huge.yaml"))
    with pytest.raises(CatalogError, match="48: duplicate key"):
        load_catalog(write(tmp_path, "codes:\n  48: {}\n  48: {}\n", "dup.yaml"))
    assert 79 in load_catalog().codes()  # the shipped one loads as before


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (GOOD + alias_bomb(), "too many aliases"),
        (GOOD + "#" * MAX_BYTES + "\n", "too large"),
    ],
    ids=["alias-bomb", "oversized"],
)
def test_validate_refuses_hostile_files_fast(
    tmp_path: Path, text: str, says: str, processes: Children
) -> None:
    path = write(tmp_path, text)
    done = processes.run([REMEDY, "runbooks", "validate", str(path)], timeout=60)
    assert done.returncode == 1, done.stderr
    [problem] = done.stderr.splitlines()  # one line, and no traceback
    assert problem.startswith(f"{path}:") and f": -: {says}" in problem, done.stderr
    assert done.stdout == ""
