"""GPU-hours kept by GPU-scoped remediation (twin/gpu_scope.py): the worked examples, and the
same faults climbed for real with and without the inference pool's GPU-scoped runbook."""

from __future__ import annotations

from datetime import timedelta

import pytest

from remedy.core.models import Action, Scope
from remedy.runbook import RunbookSet, load_runbooks
from tests.conftest import ROOT
from twin.generator import FaultEvent, FaultKind
from twin.gpu_scope import gpu_hours_kept, gpu_hours_out, gpu_time
from twin.job import ZERO, ActionCosts, LadderRun, Policy, Step, downtime
from twin.ladders import ladders_for, matching

POLICY = Policy(name="remedy", detect=timedelta(seconds=30), approval_delay=timedelta(hours=1))
# Drain and reset take an hour each: a two-hour outage for the worked example.
COSTS = ActionCosts(drain=timedelta(hours=1), reset_gpu=timedelta(hours=1))


def _step(action: Action, rung: int, scope: Scope = Scope.NODE) -> Step:
    return Step(action=action, result="done", rung=rung, took=ZERO, scope=scope)


def _run(*steps: Step) -> LadderRun:
    return LadderRun(
        fault="ecc_dbe", runbook="r", outcome="recovered", steps=list(steps), workflow_time=ZERO
    )


NODE_SCOPED = _run(
    _step(Action.CORDON, -1),
    _step(Action.DRAIN, 0),
    _step(Action.RESET_GPU, 1),
    _step(Action.RESTORE, -1),
)
GPU_SCOPED = _run(
    _step(Action.DRAIN, 0, Scope.GPU),
    _step(Action.RESET_GPU, 1, Scope.GPU),
    _step(Action.RESTORE, -1),
)


def test_the_worked_example_keeps_the_seven_other_gpus() -> None:
    two_hours = timedelta(hours=2)
    assert downtime(NODE_SCOPED, POLICY, COSTS) == downtime(GPU_SCOPED, POLICY, COSTS) == two_hours
    assert gpu_time(NODE_SCOPED, 8, POLICY, COSTS) == 8 * two_hours  # 16 GPU-hours
    assert gpu_time(GPU_SCOPED, 8, POLICY, COSTS) == two_hours  # 2: 14 kept


def test_a_ladder_that_climbs_to_a_reboot_takes_the_node_from_that_rung_on() -> None:
    climbed = _run(
        _step(Action.DRAIN, 0, Scope.GPU),  # 1 h, the faulty GPU alone
        _step(Action.REBOOT, 1),  # 15 min, the whole node
    )
    assert gpu_time(climbed, 8, POLICY, COSTS) == timedelta(hours=1, minutes=15) + 7 * timedelta(
        minutes=15
    )


def test_a_fault_on_a_node_already_out_is_part_of_that_outage() -> None:
    kind: FaultKind = ("ecc_dbe", False)
    events = [
        FaultEvent(at=timedelta(minutes=m), node=0, cause="c", fault="ecc_dbe", interrupts_job=True)
        for m in (0, 30, 180)  # the second lands inside the first's 2 h, the third after it
    ]
    hours, outages, scoped = gpu_hours_out(events, {kind: GPU_SCOPED}, 8, POLICY, COSTS)
    assert (hours, outages, scoped) == (4.0, 2, 2)


@pytest.mark.server  # the ladders run on a time-skipping server
async def test_the_same_faults_keep_gpus_only_where_a_gpu_scoped_runbook_matches(
    shipped_runbooks: RunbookSet,
) -> None:
    scoped = RunbookSet(load_runbooks([ROOT / "runbooks", ROOT / "examples" / "runbooks"]))
    events = [
        FaultEvent(at=ZERO, node=0, cause="HBM", fault="ecc_dbe", interrupts_job=True),
        FaultEvent(at=ZERO, node=1, cause="GPU", fault="gpu_lost", interrupts_job=True),
    ]
    kinds: set[FaultKind] = {e.kind for e in events}
    node_ladders = await ladders_for(kinds, matching(shipped_runbooks))
    costs = ActionCosts()

    gpu = await gpu_hours_kept(events, node_ladders, shipped_runbooks, scoped, POLICY, costs)

    assert gpu.runbooks == ["inference-gpu-ecc"] and gpu.gpu_scoped_outages == 1
    assert gpu.outages == 2
    hour = timedelta(hours=1)
    lost = gpu_time(node_ladders[("gpu_lost", False)], 8, POLICY, costs) / hour  # as before
    ecc = node_ladders[("ecc_dbe", False)]
    [ecc_by_gpu] = (await ladders_for({("ecc_dbe", False)}, matching(scoped))).values()
    assert [(s.action, s.scope) for s in ecc_by_gpu.steps if s.rung >= 0] == [
        (Action.DRAIN, Scope.GPU),
        (Action.RESET_GPU, Scope.GPU),
    ]
    assert gpu.node_scoped == pytest.approx(lost + 8 * (downtime(ecc, POLICY, costs) / hour))
    # Two climbs of one ladder differ by the milliseconds the test server's activities take.
    by_gpu = lost + downtime(ecc_by_gpu, POLICY, costs) / hour
    assert gpu.gpu_scoped == pytest.approx(by_gpu, abs=0.01)
    assert gpu.kept > 0
