"""A MIG node's layout after a reset or a reboot: the rung is recovered only once the MIG
manager applied the layout again; its ``failed`` fails the rung (fail closed); a reboot that did
not run leaves the manager's state as it was. The twin on the time-skipping server (its MIG
manager starts when the GPU operator's pods return after a reset, and at boot)."""

from __future__ import annotations

import doctest

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.mig import LAYOUT, make_mig_node
from remedy.acting import mig_layout
from remedy.core.errors import ActionFailed
from remedy.core.models import Action, Scope
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.ladder import remediate

NODE = "gpu-node-001"
BAD = 3


def mig_node(fleet: SimFleet) -> None:
    sim = fleet.node(NODE)
    make_mig_node(sim)
    sim.pods = [p for p in sim.pods if not p.uses_gpus]  # its instances idle


def ladder(*rungs: Rung) -> Runbook:
    return Runbook(name="mig-ecc", match=Match(xids=[48]), cordon=False, ladder=list(rungs))


async def test_a_reset_of_a_mig_gpu_is_recovered_once_its_layout_is_applied_again(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    mig_node(fleet)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)

    ran = await remediate(
        time_env, fleet, finding, ladder(Rung(action=Action.RESET_GPU, scope=Scope.GPU))
    )

    assert ran.result.outcome is Outcome.RECOVERED, ran.result.detail
    reset = next(a for a in ran.state.attempts if a.action is Action.RESET_GPU)
    assert reset.result is AttemptResult.VERIFIED
    assert f"MIG layout {LAYOUT} applied again" in reset.detail
    sim = fleet.node(NODE)
    assert sim.gpus[BAD].mig_instances == [1, 2]  # created again by the MIG manager
    assert sim.mig_state == "success"


async def test_a_layout_the_mig_manager_fails_to_apply_is_not_a_recovery(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    mig_node(fleet)
    fleet.node(NODE).mig_manager_fails = True
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)

    ran = await remediate(
        time_env,
        fleet,
        finding,
        ladder(Rung(action=Action.RESET_GPU, scope=Scope.GPU), Rung(action=Action.REBOOT)),
    )

    assert ran.result.outcome is Outcome.NEEDS_HUMAN, ran.result.detail
    said = f"the MIG manager failed to apply layout {LAYOUT}"
    acted = [a for a in ran.state.attempts if a.rung >= 0 and a.action is not Action.DRAIN]
    assert [(a.action, a.result) for a in acted] == [  # the node's drain before the reboot aside
        (Action.RESET_GPU, AttemptResult.FAILED),
        (Action.REBOOT, AttemptResult.FAILED),
    ]
    assert all(said in a.detail for a in acted)
    assert fleet.node(NODE).gpus[BAD].mig_instances == []  # nothing serves on it


async def test_a_reboot_of_a_mig_node_waits_for_its_layout(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    mig_node(fleet)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)

    ran = await remediate(time_env, fleet, finding, ladder(Rung(action=Action.REBOOT)))

    assert ran.result.outcome is Outcome.RECOVERED, ran.result.detail
    reboot = next(a for a in ran.state.attempts if a.action is Action.REBOOT)
    assert f"MIG layout {LAYOUT} applied again" in reboot.detail
    assert all(g.mig_instances == [1, 2] for g in fleet.node(NODE).gpus)


async def test_a_reboot_that_did_not_run_leaves_the_mig_managers_state_as_it_was(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    mig_node(fleet)
    fleet.break_action("reboot", ActionFailed("systemctl reboot exited 1"))
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)

    ran = await remediate(time_env, fleet, finding, ladder(Rung(action=Action.REBOOT)))

    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    assert fleet.node(NODE).mig_state == "success"  # not left pending by remedy


def test_the_worked_examples_of_a_restored_layout() -> None:
    assert doctest.testmod(mig_layout).failed == 0


@pytest.mark.parametrize("config", ["", "all-disabled"])
def test_a_node_without_mig_instances_has_no_layout_to_wait_for(config: str) -> None:
    assert not mig_layout.MigLayout(config=config, state="success").has_instances
