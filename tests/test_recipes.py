"""docs/architecture.md's "how to add" recipes, done: each worked example under
examples/recipes/ applies to a scratch copy of the tree, touches exactly the files its recipe
names (as many as ``FILES`` says), and passes the contract, the vocabulary, the generated docs
and its own test there, once the docs are generated again (tests/generated_docs.py: a table
that changes is written, never edited by hand); and a cluster provider (a Slurm-style node
control) runs a real ladder."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.core.errors import NodeGone
from remedy.core.models import CordonState, NodeBoot
from remedy.ladder.remediation import Outcome
from remedy.runbook import RunbookSet
from remedy.scan.cluster import CordonOwner
from tests.conftest import ROOT
from tests.generated_docs import REGIONS
from tests.ladder import remediate
from tests.processes import Children

RECIPES = sorted((ROOT / "examples" / "recipes").glob("*.patch"))
DOCS = ROOT / "docs" / "architecture.md"
# How many files each recipe names, its own test aside (issue 53 measured: an action 8,
# a probe check 4, before the table registered activities and the checks owned their terms).
FILES = {"add-a-fault-family": 2, "add-an-action": 3, "add-a-probe-check": 3}


def _tree(to: Path, processes: Children) -> Path:
    """The working tree as git sees it (tracked and new files, nothing ignored)."""
    listed = processes.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT
    )
    assert listed.returncode == 0, listed.stderr
    for name in listed.stdout.split():
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def _named_in_docs(recipe: str) -> set[str]:
    """The files the recipe's section lists (the bullets after its marker)."""
    text = DOCS.read_text()
    section = text.split(f"<!-- recipe: {recipe} -->", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^- `([^`]+)`", section, flags=re.M))


def _touched(patch: Path) -> set[str]:
    return set(re.findall(r"^diff --git a/(\S+) ", patch.read_text(), flags=re.M))


@pytest.mark.parametrize("patch", RECIPES, ids=lambda p: p.stem)
def test_a_recipe_done_touches_what_it_says_and_passes(
    patch: Path, tmp_path: Path, processes: Children
) -> None:
    touched = _touched(patch)
    own_tests = sorted(f for f in touched if f.startswith("tests/"))
    assert own_tests, f"{patch.name} brings no test of its own"
    named = _named_in_docs(patch.stem)
    assert touched - set(own_tests) == named
    assert len(named) == FILES[patch.stem], sorted(named)
    tree = _tree(tmp_path / "tree", processes)
    applied = processes.run(["git", "apply", str(patch)], cwd=tree)
    assert applied.returncode == 0, applied.stderr
    env = {**os.environ, "PYTHONPATH": str(tree)}
    docs = processes.run([sys.executable, "-m", "tests.generated_docs"], cwd=tree, env=env)
    assert docs.returncode == 0, docs.stderr
    wrote = [Path(line.split(" ", 1)[1]).resolve() for line in docs.stdout.splitlines()]
    generated = {str(w.relative_to(tree.resolve())) for w in wrote}
    assert generated <= {doc for doc, _ in REGIONS.values()}  # written, never edited by hand
    ran = processes.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            "tests/test_contract.py",
            "tests/test_vocabulary.py",
            "tests/test_generated_docs.py",
            *own_tests,
        ],
        cwd=tree,
        env=env,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout.splitlines()[-1]


def test_every_recipe_in_the_docs_has_its_worked_example() -> None:
    marked = re.findall(r"<!-- recipe: ([a-z-]+) -->", DOCS.read_text())
    assert sorted(marked) == [p.stem for p in RECIPES]


# -- a cluster provider: Slurm's node states for taking a node out and back ------------------
class FakeSlurmctld:
    """slurmctld over the simulated machines: node states by name, the jobs on each node (the
    simulated pods using GPUs) and each node's boot, as slurmd reports it."""

    def __init__(self, fleet: SimFleet) -> None:
        self._fleet = fleet
        self.commands: list[str] = []
        self._states: dict[str, str] = {}

    def run(self, *argv: str) -> str:
        self.commands.append(" ".join(argv))
        args = dict(a.split("=", 1) for a in argv if "=" in a)
        node = args.get("NodeName") or args.get("--nodelist") or argv[-1]
        if node not in self._fleet.nodes:
            raise NodeGone(f"slurm knows no node {node}")
        sim = self._fleet.node(node)
        if argv[:2] == ("scontrol", "update"):
            self._states[node] = args["State"].replace("RESUME", "IDLE")
            return ""
        if argv[0] == "scancel":  # requeue: the jobs leave the node
            sim.pods = [p for p in sim.pods if not p.uses_gpus]
            return ""
        state = self._states.get(node, "IDLE")
        return f"NodeName={node} State={state} BootTime={sim.boot}"


class SlurmNodeControl:
    """``NodeControl`` on Slurm, through its commands (a provider's whole node-control seam)."""

    def __init__(self, run: FakeSlurmctld) -> None:
        self._slurm = run

    def _show(self, node: str) -> dict[str, str]:
        out = self._slurm.run("scontrol", "show", "node", node)
        return dict(part.split("=", 1) for part in out.split())

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        if self._show(node)["State"].startswith("DRAIN"):
            return CordonState.BY_OTHER
        self._slurm.run(
            "scontrol",
            "update",
            f"NodeName={node}",
            "State=DRAIN",
            f"Reason=remedy:{owner.workflow_id}",
        )
        return CordonState.CORDONED

    def restore(self, node: str) -> bool:
        self._slurm.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
        return True

    def drain(self, node: str, on_progress: Callable[[int], None], key: str = "") -> str:
        self._slurm.run("scancel", "--state=RUNNING", f"--nodelist={node}")
        return "requeued the node's running jobs"

    def kill_gpu_pods(self, node: str, key: str = "") -> str:
        self._slurm.run("scancel", f"--nodelist={node}")
        return "cancelled the node's jobs"

    def node_boot(self, node: str) -> NodeBoot:
        shown = self._show(node)
        return NodeBoot(boot_id=shown["BootTime"], ready=not shown["State"].startswith("DOWN"))


async def test_a_cluster_provider_implements_only_the_seams_it_changes(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = sorted(fleet.nodes)[0]
    slurm = FakeSlurmctld(fleet)
    on_slurm = dataclasses.replace(fleet.cluster, control=SlurmNodeControl(slurm))
    finding = fleet.inject(node, "gpu_lost", gpu=5)  # only a reboot brings it back
    ran = await remediate(
        time_env, fleet, finding, shipped_runbooks.match(finding), cluster=on_slurm
    )
    assert ran.result.outcome is Outcome.RECOVERED
    changes = [c for c in slurm.commands if not c.startswith("scontrol show")]
    assert changes == [
        f"scontrol update NodeName={node} State=DRAIN Reason=remedy:node-remediation/{node}",
        f"scancel --state=RUNNING --nodelist={node}",
        f"scontrol update NodeName={node} State=RESUME",
    ]
    assert [a for n, a in fleet.actions if n == node] == ["reboot"]  # on the machine itself
