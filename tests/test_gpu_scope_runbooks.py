"""`scope: gpu` in runbooks: allowed on drain, kill_job and reset_gpu, refused elsewhere with
file, line and field; `remedy runbooks explain` says what a GPU-scoped rung does."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from remedy.core.models import Action, Scope
from remedy.runbook import load_runbooks
from remedy.runbook.explain import DRAINS_FIRST
from tests.test_runbooks import problems, write
from workers.cli import app

EXAMPLE = Path(__file__).parent.parent / "examples" / "runbooks" / "inference-gpu-ecc.yaml"


def test_the_example_runbook_scopes_drain_and_reset_to_the_gpu() -> None:
    [runbook] = load_runbooks([EXAMPLE])
    assert [r.scope for r in runbook.ladder] == [Scope.GPU, Scope.GPU, *[Scope.NODE] * 3]
    assert [r.action for r in runbook.ladder][2:] == [Action.CORDON, Action.DRAIN, Action.REBOOT]
    assert not runbook.cordon  # the node is cordoned and drained before its reboot only


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
    assert "reboot the node" in rungs[4]
    assert DRAINS_FIRST not in result.output  # the example drains the node itself


def test_explain_says_a_reboot_after_gpu_scoped_rungs_drains_the_node_first(
    tmp_path: Path,
) -> None:
    """The example as it was: a GPU's drain and reset, then a reboot."""
    ladder = "  - {action: drain, scope: gpu}\n  - {action: reset_gpu, scope: gpu}\n"
    text = f"name: shared\nmatch: {{xids: [48]}}\ncordon: false\nladder:\n{ladder}"
    (tmp_path / "shared.yaml").write_text(text + "  - action: reboot\n")
    result = CliRunner().invoke(app, ["runbooks", "explain", "shared", "--runbooks", str(tmp_path)])
    assert result.exit_code == 0, result.output
    said = result.output.splitlines()
    reboot = next(i for i, line in enumerate(said) if "rung 3: reboot the node" in line)
    assert DRAINS_FIRST in "\n".join(said[reboot : reboot + 3])
