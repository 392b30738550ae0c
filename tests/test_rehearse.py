"""`remedy runbooks rehearse`: each shipped runbook climbed for real on the time-skipping
server against a simulated node; the fault decides where the ladder stops."""

from __future__ import annotations

import json
import re
import time

import pytest
from typer.testing import CliRunner

from adapters.sim.nvml import SimNvml
from remedy.runbook import load_runbooks
from remedy.runbook.drain_first import drains_first
from tests.conftest import ROOT
from workers.cli import app

pytestmark = pytest.mark.server  # a rehearsal starts its own time-skipping server

RUNBOOKS = {r.name: r for r in load_runbooks([ROOT / "runbooks"])}
SHIPPED = sorted(RUNBOOKS)


def rehearse(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["runbooks", "rehearse", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_runbook_rehearses_to_an_outcome(name: str) -> None:
    code, out = rehearse(name, "--json")
    assert code == 0, out
    done = json.loads(out)
    result = done["result"]
    runbook, attempts = RUNBOOKS[name], result["attempts"]
    assert done["runbook"] == name
    if runbook.proves:  # the proof found the fault (slow-node's): that fault's runbook climbs
        assert [e["kind"] for e in result["escalations"]] == ["proven"]
        assert attempts[0]["action"] == "diagnose" and result["runbook"] != name
        runbook, attempts = RUNBOOKS[result["runbook"]], attempts[1:]
    assert result["runbook"] == runbook.name
    assert result["outcome"] in ("recovered", "replaced", "needs_human", "cleared")
    ladder = [r.action.value for r in runbook.ladder]
    rungs = [a for a in attempts if a["rung"] >= 0]
    climbed = [a["action"] for a in rungs if a["action"] == ladder[a["rung"]]]
    assert climbed == ladder[: len(climbed)]
    first = [a for a in rungs if a["action"] != ladder[a["rung"]]]  # the node's drain, first
    assert all(a["action"] == "drain" and drains_first(runbook.ladder, a["rung"]) for a in first)
    passes = "time" in done["fixed_by"] and result["outcome"] == "cleared"
    assert climbed or not ladder or passes, "climbed no rung for a fault that stays"


def test_a_transient_fault_passes_on_the_workflows_clock() -> None:
    """The slowdown lasts 2 minutes and the window 10, rechecked every minute: the simulated
    node ages its fault on the (skipped) workflow time, so the re-probe at T+2m finds it gone
    and nothing is drained or reset — on the wall's clock the fault would still be there."""
    code, out = rehearse("thermal", "--fault", "thermal_transient", "--json")
    assert code == 0, out
    result = json.loads(out)["result"]
    assert result["outcome"] == "cleared", result["detail"]
    assert result["detail"] == "clean re-probe inside the tolerance window"
    assert [a["action"] for a in result["attempts"]] == ["cordon", "restore"]


def test_the_fault_decides_which_rung_fixes_the_node() -> None:
    code, ecc = rehearse("gpu-memory-ecc")  # default fault: an ECC error, which a reset fixes
    _, lost = rehearse("gpu-memory-ecc", "--fault", "gpu_lost")  # only a reboot reaches it
    assert code == 0
    assert ecc.splitlines()[0].startswith(
        "rehearsal of gpu-memory-ecc: simulated fault ecc_dbe "
        "(fixed by reset_gpu or reboot or replace)"
    )
    assert [line.split()[3] for line in ecc.splitlines() if line.startswith("  T+")] == [
        "cordon",
        "drain",
        "reset_gpu",
        "restore",
    ]
    # 30s settle, then the quiet watch for Xid 48 (10m) before it counts as recovered; the
    # server skips only the waits, so the activities' own wall time comes on top (a loaded
    # machine's make test-stress saw 10m31s)
    took = re.search(
        r"outcome recovered after (\d+)m(\d+)s of workflow time: healthy after reset_gpu", ecc
    )
    assert took, ecc
    assert 630 <= int(took[1]) * 60 + int(took[2]) < 690, took[0]
    steps = [line.split()[3:5] for line in lost.splitlines() if line.startswith("  T+")]
    assert steps == [
        ["cordon", "done"],
        ["drain", "done"],
        ["reset_gpu", "failed"],
        ["reboot", "verified"],
        ["restore", "done"],
    ]


def test_a_hung_job_is_killed_and_the_gpu_left_alone() -> None:
    code, out = rehearse("hung-job", "--json")  # default fault: job_hang, Xid 8
    assert code == 0, out
    result = json.loads(out)["result"]
    assert [(a["action"], a["result"]) for a in result["attempts"]] == [
        ("cordon", "done"),
        ("kill_job", "verified"),
        ("restore", "done"),
    ]
    assert result["outcome"] == "recovered"


def test_withheld_approval_times_out_and_leaves_the_node_for_a_human() -> None:
    code, out = rehearse("gpu-row-remap-failure", "--no-approve", "--json")
    result = json.loads(out)["result"]
    assert code == 0
    assert result["outcome"] == "needs_human"
    assert result["attempts"][-1]["result"] == "approval_timed_out"
    assert "no approval for replace within" in result["detail"]


def test_a_stalled_probe_is_not_a_hung_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every probe starts 0.4 s late, as when a busy process stalls (a garbage collection
    holding the GIL: what escalated a working reset in a full test run). The reset is still
    verified; with the old 0.2 s check timeout every probe timed out and the ladder climbed on
    to a replacement."""
    init = SimNvml.nvmlInit

    def stalled(nvml: SimNvml) -> None:
        time.sleep(0.4)
        init(nvml)

    monkeypatch.setattr(SimNvml, "nvmlInit", stalled)
    code, out = rehearse("gpu-memory-ecc", "--json")
    assert code == 0, out
    result = json.loads(out)["result"]
    climbed = [(a["action"], a["result"]) for a in result["attempts"] if a["rung"] >= 0]
    assert climbed == [("drain", "done"), ("reset_gpu", "verified")], result["detail"]


def test_bad_names_are_one_line_and_exit_1() -> None:
    assert rehearse("nope")[0] == 1
    code, out = rehearse("gpu-memory-ecc", "--fault", "cosmic_ray")
    assert code == 1 and "unknown fault 'cosmic_ray'" in out
