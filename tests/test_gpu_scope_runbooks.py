"""`scope: gpu` in runbooks: allowed on drain, kill_job and reset_gpu, refused elsewhere with
file, line and field; `remedy runbooks explain` says what a GPU-scoped rung does."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from remedy.models import Scope
from remedy.runbook import load_runbooks
from tests.test_runbooks import problems, write
from workers.cli import app

EXAMPLE = Path(__file__).parent.parent / "examples" / "runbooks" / "inference-gpu-ecc.yaml"


def test_the_example_runbook_scopes_drain_and_reset_to_the_gpu() -> None:
    [runbook] = load_runbooks([EXAMPLE])
    assert [r.scope for r in runbook.ladder] == [Scope.GPU, Scope.GPU, Scope.NODE]
    assert not runbook.cordon


def test_scope_gpu_on_a_node_level_rung_names_file_line_and_field(tmp_path: Path) -> None:
    text = "name: x\nmatch: {xids: [48]}\nladder:\n  - action: reboot\n    scope: gpu\n"
    path = write(tmp_path, "bad.yaml", text)
    [problem] = problems(path)
    assert problem.startswith(f"{path}:5: ladder[0].scope: scope: gpu is for drain")


def test_explain_describes_a_gpu_scoped_rung(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path)
    result = CliRunner().invoke(
        app, ["runbooks", "explain", "inference-gpu-ecc", "--runbooks", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    rungs = [line for line in result.output.splitlines() if " rung " in line]
    assert "quarantine the faulty GPU" in rungs[0] and "evict only the pods using it" in rungs[0]
    assert "reset the faulty GPU once its pods and MIG instances are idle" in rungs[1]
    assert "reboot the node" in rungs[2]
