"""`remedy runbooks explain` and `remedy runbooks schema`: what an author reads and what an
editor checks a runbook against."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from remedy.core.durations import format_duration
from remedy.core.models import Action
from remedy.runbook import load_runbooks
from remedy.runbook.explain import timings
from remedy.runbook.schema import json_schema
from tests.conftest import ROOT
from workers.cli import app

# Both rungs say `if_not_drained: force`: the bounds below are the ladder's own, without the
# drain a node-level rung needs first (test_drain_first, test_runbook_lint count that one).
RUNBOOK = """name: slow-gpu
description: A GPU that keeps throttling.
match: {checks: [thermal], reasons: [HwSlowdown]}
tolerance: 10m
recheck_every: 2m
ladder:
  - action: reset_gpu
    timeout: 5m
    retry: {max_attempts: 2, initial_interval: 10s}
    settle: 30s
    if_not_drained: force
  - action: reboot
    timeout: 20m
    if_not_drained: force
    retry: {max_attempts: 1}
    approval: required
    approval_timeout: 1h
"""


def test_worst_case_adds_every_bound_of_the_ladder(tmp_path: Path) -> None:
    (tmp_path / "slow-gpu.yaml").write_text(RUNBOOK)
    [runbook] = load_runbooks([tmp_path])
    reset, reboot = timings(runbook)
    # tolerance 10m; reset: 2 attempts × 5m + 10s backoff, settle 30s, probe ≤ 125s
    assert reset.starts_by == timedelta(minutes=10)
    assert reset.action_worst_case == timedelta(minutes=10, seconds=10)
    assert reset.ends_by == timedelta(minutes=22, seconds=45)
    # approval may come at the last moment of its hour; a reboot also waits to come back
    assert reboot.action is Action.REBOOT
    assert reboot.starts_by == timedelta(hours=1, minutes=22, seconds=45)
    assert reboot.action_worst_case == timedelta(minutes=41)  # 20m + 20m back + 60s boot id


def test_worst_case_counts_the_watch_of_a_runbook_an_xid_triggers(tmp_path: Path) -> None:
    thermal = "match: {checks: [thermal], reasons: [HwSlowdown]}"
    xid = RUNBOOK.replace(thermal, "match: {xids: [62]}")
    (tmp_path / "slow-gpu.yaml").write_text(xid + "watch: 10m\n")
    [runbook] = load_runbooks([tmp_path])
    reset, reboot = timings(runbook)
    # as above, then the 10m watch, the read of the node's Xids (≤ 60s) and a probe (≤ 125s)
    assert reset.ends_by == timedelta(minutes=22, seconds=45) + timedelta(minutes=13, seconds=5)
    result = CliRunner().invoke(
        app, ["runbooks", "explain", "slow-gpu", "--runbooks", str(tmp_path)]
    )
    assert "re-probe, then for an Xid a 10m watch for it again" in result.output
    last = result.output.splitlines()[-1].split()
    assert last[:2] == ["by", format_duration(reboot.ends_by)] and "needs_human" in last[-1]


def test_explain_prints_the_ladder_in_words(tmp_path: Path) -> None:
    (tmp_path / "slow-gpu.yaml").write_text(RUNBOOK)
    result = CliRunner().invoke(
        app, ["runbooks", "explain", "slow-gpu", "--runbooks", str(tmp_path)]
    )
    lines = result.output.splitlines()
    assert result.exit_code == 0, result.output
    assert lines[0] == "slow-gpu: A GPU that keeps throttling."
    assert "matches a finding with check thermal with reason HwSlowdown" in lines
    assert any("tolerate for 10m, re-probing every 2m" in line for line in lines)
    assert any(line.split()[:4] == ["by", "10m", "rung", "1:"] for line in lines)
    assert any(line.split()[:4] == ["by", "1h22m45s", "rung", "2:"] for line in lines)
    assert any("needs approval (remedy approve NODE); none within 1h" in line for line in lines)
    assert lines[-1].split()[:2] == ["by", "2h5m50s"] and "needs_human" in lines[-1]


def test_explain_knows_every_shipped_runbook_and_refuses_unknown_ones() -> None:
    for runbook in load_runbooks([ROOT / "runbooks"]):
        result = CliRunner().invoke(app, ["runbooks", "explain", runbook.name])
        assert result.exit_code == 0 and "when it matches:" in result.output, runbook.name
    missing = CliRunner().invoke(app, ["runbooks", "explain", "nope"])
    assert missing.exit_code == 1 and "no runbook named 'nope'" in missing.output


def test_schema_accepts_every_shipped_runbook() -> None:
    result = CliRunner().invoke(app, ["runbooks", "schema"])
    schema = json.loads(result.output)
    assert result.exit_code == 0 and schema == json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    files = sorted((ROOT / "runbooks").glob("*.yaml"))
    assert len(files) >= 13
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"tolerance": "10 minutes"}, "does not match"),
        ({"tolerence": "10m"}, "Additional properties"),
        ({"ladder": [{"action": "explode"}]}, "is not one of"),
        ({"match": {"xids": 79}}, "is not of type 'array'"),
    ],
)
def test_schema_rejects_what_the_loader_rejects(
    change: dict[str, object], why: str, tmp_path: Path
) -> None:
    doc = {**yaml.safe_load(RUNBOOK), **change}
    with pytest.raises(jsonschema.ValidationError, match=why):
        jsonschema.validate(doc, json_schema())
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(doc))
    assert CliRunner().invoke(app, ["runbooks", "validate", str(tmp_path)]).exit_code == 1
