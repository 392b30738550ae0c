"""Every shipped ladder does first what NVIDIA recommends first for the Xids it matches, read
from the Xid catalog (remedy/xid/catalog.yaml), so a ladder that reboots for a restart-the-app
Xid, or starts for an Xid NVIDIA says to ignore, fails here and warns in `validate`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from remedy.core.models import Action
from remedy.runbook import RunbookSet, load_runbooks
from remedy.runbook.advice import AGREES, DECODED, disagreements, first_effective_rung, matched_xids
from remedy.xid import load_catalog
from remedy.xid.actions import XidAction
from remedy.xid.catalog import Decoder
from tests.conftest import ROOT
from workers.cli import app

SHIPPED = sorted(r.name for r in load_runbooks([ROOT / "runbooks"]))


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_ladder_takes_nvidias_first_action_first(
    shipped_runbooks: RunbookSet, name: str
) -> None:
    runbook = shipped_runbooks.get(name)
    assert disagreements(runbook, load_catalog()) == []
    for xid in matched_xids(runbook):  # the rule itself, spelt out from the catalog
        info = load_catalog().lookup(xid)
        assert info.action is not XidAction.IGNORE, (name, xid)
        # Where the message decides (154, 74, ...), the catalog's action is only a fallback.
        agrees = DECODED if info.decode is not Decoder.NONE else AGREES[info.action]
        assert first_effective_rung(runbook) in agrees, (name, xid, info.action)


def runbook_file(tmp_path: Path, xids: list[int], ladder: list[str]) -> Path:
    rungs = "".join(f"\n  - action: {a}" for a in ladder) or " []"
    path = tmp_path / "custom.yaml"
    path.write_text(f"name: custom\nmatch: {{xids: {xids}}}\nladder:{rungs}\n")
    return path


@pytest.mark.parametrize(
    ("xids", "ladder", "says"),
    [
        # Xid 13: restart the application — never a reboot first.
        ([13], ["drain", "reboot"], "Xid 13: NVIDIA's first action is restart_app; "),
        # Xid 79: only a reboot reaches a GPU that left the bus.
        ([79], ["drain", "reset_gpu", "reboot"], "Xid 79: NVIDIA's first action is reboot; "),
        # Xid 48: reset the GPU — killing the job does not clear the ECC error.
        ([48], ["kill_job", "reset_gpu"], "Xid 48: NVIDIA's first action is reset_gpu; "),
        # Xid 43: a channel reset NVIDIA says to ignore (follow the Xid before it).
        ([43], ["kill_job"], "Xid 43: NVIDIA says to ignore it"),
        # Xid 64 (a remap or page-retirement failure): reset first, replace after a diagnose.
        ([64], ["drain", "replace"], "Xid 64: NVIDIA's first action is reset_gpu; "),
        # Xid 54 (aux power not connected): a person checks the seating, nothing disruptive.
        ([54], ["drain", "reset_gpu"], "Xid 54: NVIDIA's first action is check_mechanicals; "),
        # Xid 151 (restart the VM): on Kubernetes the VM is the node, a reboot, not a reset.
        ([151], ["reset_gpu"], "Xid 151: NVIDIA's first action is restart_vm; "),
        # Xid 154 names the recovery it needs: anything short of a replacement may follow.
        ([154], ["replace"], "Xid 154: its message decides NVIDIA's first action; "),
    ],
)
def test_a_ladder_against_the_advice_is_reported(
    tmp_path: Path, xids: list[int], ladder: list[str], says: str
) -> None:
    [runbook] = load_runbooks([runbook_file(tmp_path, xids, ladder)])
    [problem] = disagreements(runbook, load_catalog())
    assert problem.startswith(f"custom: {says}")


@pytest.mark.parametrize(
    ("xids", "ladder"),
    [
        ([151], ["drain", "reboot"]),  # restart_vm
        ([45], ["diagnose"]),  # restart_fabric_manager: a ladder may still leave it to a person
        ([45], ["drain", "restart_fabric_manager", "reboot"]),  # or restart it first
        ([164, 168], ["diagnose"]),  # contact_support: a person decides
        ([171, 172], ["drain", "reset_gpu"]),  # with Xid 48: reset the GPU
        ([154], ["drain", "reboot"]),  # the message may ask for a node reboot
    ],
)
def test_a_ladder_that_follows_the_advice_is_not_reported(
    tmp_path: Path, xids: list[int], ladder: list[str]
) -> None:
    [runbook] = load_runbooks([runbook_file(tmp_path, xids, ladder)])
    assert disagreements(runbook, load_catalog()) == []


def test_validate_warns_but_accepts_a_ladder_against_the_advice(tmp_path: Path) -> None:
    path = runbook_file(tmp_path, [13], ["drain", "reboot"])
    result = CliRunner().invoke(app, ["runbooks", "validate", str(path)])
    assert result.exit_code == 0
    assert "ok  custom: drain → reboot" in result.output
    assert (
        "warning: custom: Xid 13: NVIDIA's first action is restart_app; "
        "the ladder's first effective rung is reboot"
    ) in result.output


def test_shipped_runbooks_validate_without_warnings() -> None:
    result = CliRunner().invoke(app, ["runbooks", "validate", str(ROOT / "runbooks")])
    assert result.exit_code == 0 and "warning" not in result.output


def test_a_hung_job_is_killed_before_the_gpu_is_touched(shipped_runbooks: RunbookSet) -> None:
    hung = shipped_runbooks.get("hung-job")
    actions = [r.action for r in hung.ladder]
    assert actions[0] is Action.KILL_JOB
    assert actions.index(Action.KILL_JOB) < actions.index(Action.RESET_GPU)
    assert load_catalog().lookup(8).action is XidAction.RESTART_APP
