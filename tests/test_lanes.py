"""The suite's lanes as make and CI run them: `make test` and `make test-slow` each run one lane
of tests/suite.py, and CI runs both, so every collected test runs in CI."""

from __future__ import annotations

import re
from pathlib import Path

from tests import suite

ROOT = Path(__file__).resolve().parent.parent


def _recipe(target: str) -> str:
    """The commands of a Makefile target."""
    text = (ROOT / "Makefile").read_text()
    found = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.MULTILINE)
    assert found, f"no `{target}` target in the Makefile"
    return found.group(1)


def test_make_test_and_test_slow_run_one_lane_each() -> None:
    targets = ("test", "test-slow")
    lanes = {target: re.findall(r"--lane (\S+)", _recipe(target)) for target in targets}
    assert lanes == {"test": ["test"], "test-slow": ["slow"]}
    assert sorted(suite.LANES) == sorted(lane for found in lanes.values() for lane in found)


def test_ci_runs_both_lanes() -> None:
    commands = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "make test" in commands and "make test-slow" in commands
