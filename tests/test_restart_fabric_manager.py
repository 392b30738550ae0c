"""restart_fabric_manager: one command on the node, through the agent's activity, at most once
per key, recorded where it lands (the agent's state directory, as a reset's is); refused where
the agent may not act on the hardware; and the shipped runbooks climb to it in the simulation.

The real host runs a real ``systemctl`` process: a script of that name first on PATH, which
counts its runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.node import NodeActivities
from adapters.host.local import LocalHost
from adapters.sim import SimFleet
from remedy.core.actions import ACTIONS, Where, needs_the_node_drained
from remedy.core.errors import ActionRefused
from remedy.core.models import Action, ActionRequest, ActionResult, NodeRef, Scope
from remedy.detection.probe import ProbeConfig
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from tests.ladder import Ran, remediate

pytestmark = pytest.mark.server  # the host runs systemctl as a process

NODE = "gpu-node-000"


def request(key: str) -> ActionRequest:
    return ActionRequest(
        node=NodeRef(name=NODE),
        action=Action.RESTART_FABRIC_MANAGER,
        reason="FabricManagerDown",
        workflow_id=f"node-remediation/{NODE}",
        key=key,
    )


def restart(local: LocalHost, key: str) -> ActionResult:
    acts = NodeActivities(lambda _: local)
    result: ActionResult = ActivityEnvironment().run(acts.restart_fabric_manager, request(key))
    return result


@pytest.fixture
def systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A systemctl first on PATH that writes each command line it was given."""
    runs = tmp_path / "runs"
    fake = tmp_path / "bin" / "systemctl"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {runs}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    return runs


def test_the_row_says_where_it_runs_and_what_it_takes_away() -> None:
    row = ACTIONS[Action.RESTART_FABRIC_MANAGER]
    assert row.where is Where.NODE and row.disruptive and row.hardware and row.verifies
    assert needs_the_node_drained(Action.RESTART_FABRIC_MANAGER, Scope.NODE)
    assert not row.gpu_scoped  # the service serves every GPU of the node


def test_run_twice_with_one_key_it_restarts_once(tmp_path: Path, systemctl: Path) -> None:
    local = LocalHost(NODE, ProbeConfig(), allow_reset=True, state_dir=tmp_path / "state")
    first, again = restart(local, "ladder-1/restart"), restart(local, "ladder-1/restart")
    assert systemctl.read_text() == "restart nvidia-fabricmanager\n"  # one effect
    assert first.ok and again.ok
    ledger = json.loads((tmp_path / "state" / "actions.json").read_text())
    assert "ladder-1/restart" in json.dumps(ledger)  # the key, where the effect landed
    restart(local, "ladder-2/restart")  # another ladder's key: its own restart
    assert systemctl.read_text().count("restart") == 2


def test_refused_where_the_agent_may_not_act_on_the_hardware(
    tmp_path: Path, systemctl: Path
) -> None:
    local = LocalHost(NODE, ProbeConfig(), state_dir=tmp_path / "state")
    with pytest.raises(ActionRefused, match="start the agent with --allow-reset"):
        local.run_action(Action.RESTART_FABRIC_MANAGER, ["systemctl", "restart", "x"], "k")
    assert not systemctl.exists()


def test_the_simulated_host_restarts_once_per_key() -> None:
    fleet = SimFleet(nodes=1)
    fleet.inject(NODE, "fabric_manager_down", gpu=0)
    host = fleet.host(NODE)
    command = ["systemctl", "restart", "nvidia-fabricmanager"]
    host.run_action(Action.RESTART_FABRIC_MANAGER, command, "k")
    fleet.inject(NODE, "fabric_manager_down", gpu=0)  # it fails again after the restart
    host.run_action(Action.RESTART_FABRIC_MANAGER, command, "k")  # a retry of the same key
    assert [a for n, a in fleet.actions if n == NODE] == ["restart_fabric_manager"]
    assert fleet.node(NODE).faults  # the retry did not restart it a second time


async def climb(
    env: WorkflowEnvironment, fleet: SimFleet, shipped: RunbookSet, fault: str, gpu: int
) -> tuple[str, Ran]:
    """The fault on the first node, through the shipped runbook it matches (its durations
    divided by 600), and what the ladder did."""
    finding = fleet.inject(sorted(fleet.nodes)[0], fault, gpu=gpu)
    runbook = shipped.match(finding)
    assert runbook is not None and runbook.cordon
    ran = await remediate(env, fleet, finding, runbook.scaled(600))
    assert ran.result.outcome is Outcome.RECOVERED
    return runbook.name, ran


def actions(fleet: SimFleet) -> list[str]:
    return [a for n, a in fleet.actions if n == sorted(fleet.nodes)[0]]


async def test_fabric_manager_down_climbs_the_shipped_fabric_ladder(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    name, ran = await climb(time_env, fleet, shipped_runbooks, "fabric_manager_down", 0)
    assert name == "fabric"
    assert ran.ladder == [
        (Action.DRAIN, AttemptResult.DONE),
        (Action.RESTART_FABRIC_MANAGER, AttemptResult.VERIFIED),
    ]
    assert actions(fleet) == ["cordon", "drain", "restart_fabric_manager", "restore"]


async def test_an_nvlink_crc_storm_cordons_and_climbs_to_a_reset(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    name, _ = await climb(time_env, fleet, shipped_runbooks, "nvlink_crc", 3)
    assert name == "nvlink-errors"
    assert actions(fleet) == ["cordon", "drain", "reset_gpu", "restore"]
