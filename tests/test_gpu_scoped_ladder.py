"""A GPU-scoped ladder on the time-skipping server over the twin: one GPU of eight fails on a
node shared by eight one-GPU pods; only the pod on that GPU is evicted, the node is never
cordoned, the GPU is quarantined, reset, and returned to allocation. A node-level rung above
them drains the node first; a second GPU's fault gets its own quarantine and eviction."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.node import SimPod
from remedy.acting.gpu_use import GpuClaim
from remedy.core.models import Action, Scope
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import running_workers
from tests.ladder import Handle, remediate, report, send_report, state_of
from tests.servers import finished

NODE = "gpu-node-001"
BAD = 3


def shared(fleet: SimFleet, mig: bool = False) -> list[str]:
    """Eight one-GPU inference pods (or, ``mig``, two MIG instances of each GPU)."""
    sim = fleet.node(NODE)
    per_gpu = [f"GPU-I:{i:02d}" for i in (1, 2)] if mig else [None]
    pods = [
        SimPod(
            f"infer-{g}-{n}",
            uses_gpus=True,
            gpus=(g,),
            mig=m,
            via=GpuClaim.MIG if m else GpuClaim.DEVICE_PLUGIN,
        )
        for g in range(8)
        for n, m in enumerate(per_gpu)
    ]
    sim.pods = [p for p in sim.pods if not p.uses_gpus] + pods
    return [p.name for p in pods]


def gpu_ladder() -> Runbook:
    return Runbook(
        name="single-gpu-ecc",
        match=Match(xids=[48]),
        cordon=False,  # the GPU's quarantine keeps new work off it; the node keeps serving
        ladder=[
            Rung(action=Action.DRAIN, scope=Scope.GPU),
            Rung(action=Action.RESET_GPU, scope=Scope.GPU),
            Rung(action=Action.REBOOT),
        ],
    )


@pytest.mark.parametrize("mig", [False, True], ids=["whole-gpus", "mig-instances"])
async def test_one_bad_gpu_of_eight_evicts_only_its_pods_and_returns_the_gpu(
    time_env: WorkflowEnvironment, fleet: SimFleet, mig: bool
) -> None:
    pods = shared(fleet, mig)
    on_bad = [p for p in pods if p.startswith(f"infer-{BAD}-")]
    finding = fleet.inject(NODE, "ecc_dbe", gpu=BAD)

    ran = await remediate(time_env, fleet, finding, gpu_ladder())

    assert ran.result.outcome is Outcome.RECOVERED
    left = [p.name for p in fleet.node(NODE).pods if p.uses_gpus]
    assert left == [p for p in pods if p not in on_bad]  # the other GPUs' pods kept running
    assert len(left) == len(pods) - len(on_bad)
    sim = fleet.node(NODE)
    assert not sim.unschedulable  # never cordoned
    assert "cordon" not in [a for n, a in fleet.actions if n == NODE]
    assert sim.quarantined == {}  # returned to allocation once verified
    reset = next(a for a in ran.state.attempts if a.action is Action.RESET_GPU)
    assert reset.result is AttemptResult.VERIFIED
    drain = next(a for a in ran.state.attempts if a.action is Action.DRAIN)
    assert f"GPU {BAD} quarantined" in drain.detail
    restore = ran.state.attempts[-1]
    assert restore.action is Action.RESTORE and f"GPU {BAD} back in allocation" in restore.detail


def on_node(fleet: SimFleet) -> list[str]:
    return [action for name, action in fleet.actions if name == NODE]


async def test_a_reboot_after_gpu_scoped_rungs_drains_the_node_first(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """The issue's example: GPU 3's drain and reset leave the seven other GPUs' pods on the
    node; the reboot above them cordons and drains the node first. Before, the node rebooted
    with those pods on it."""
    pods = shared(fleet)
    finding = fleet.inject(NODE, "gpu_lost", gpu=BAD)  # only a reboot brings it back
    rebooting = fleet.hold("reboot")
    on_it: list[str] = []
    cordoned: list[bool] = []

    async def at_reboot(handle: Handle) -> None:
        try:
            assert await asyncio.to_thread(rebooting.entered.wait, 60)
            sim = fleet.node(NODE)
            on_it.extend(p.name for p in sim.pods if not p.daemonset)
            cordoned.append(sim.unschedulable)
        finally:
            rebooting.release()

    ran = await remediate(time_env, fleet, finding, gpu_ladder(), meanwhile=at_reboot)

    assert on_it == []  # none of the seven other GPUs' pods went down with the reboot
    assert cordoned == [True]  # and none landed on it meanwhile
    assert ran.result.outcome is Outcome.RECOVERED, ran.result.detail
    assert on_node(fleet)[-4:] == ["cordon", "drain", "reboot", "restore"]
    rungs = [(a.rung, a.action, a.gpus) for a in ran.result.attempts if a.rung >= 0]
    assert rungs[0] == (0, Action.DRAIN, [BAD])  # the GPU's own drain: that GPU only
    assert rungs[-2:] == [(2, Action.DRAIN, None), (2, Action.REBOOT, None)]  # the node's
    drain = [a for a in ran.result.attempts if a.action is Action.DRAIN][-1]
    assert drain.result is AttemptResult.DONE
    assert drain.detail.startswith("before reboot, which needs the node drained")
    assert f"evicted {len(pods) - 1} pods" in drain.detail
    sim = fleet.node(NODE)
    assert sim.quarantined == {} and not sim.unschedulable  # given back, GPU and node


async def test_a_second_gpus_fault_is_quarantined_and_evicted_before_its_reset(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """Xid 48 on GPU 1, then on GPU 6: GPU 6's ladder starts at its own GPU-scoped drain.
    Before, it continued "from rung 2: the rungs below were done" and reset GPU 6 with its
    pod on it and the GPU still in allocation (GPU 1's drain counted for GPU 6)."""
    shared(fleet)
    first = fleet.inject(NODE, "ecc_dbe", gpu=1)
    second = fleet.inject(NODE, "ecc_dbe", gpu=6)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, first, gpu_ladder())
        await send_report(handle, second, gpu_ladder())
        result = await finished(time_env, handle)
        state = await state_of(handle)

    assert result.outcome is Outcome.RECOVERED, result.detail
    assert on_node(fleet) == ["drain", "reset_gpu", "drain", "reset_gpu"]
    rungs = [(a.action, a.result, a.gpus, a.epoch) for a in result.attempts if a.rung >= 0]
    assert rungs == [
        (Action.DRAIN, AttemptResult.DONE, [1], 0),
        (Action.RESET_GPU, AttemptResult.VERIFIED, [1], 0),
        (Action.DRAIN, AttemptResult.DONE, [6], 1),  # GPU 6's own quarantine and eviction
        (Action.RESET_GPU, AttemptResult.VERIFIED, [6], 1),
    ]
    drain = [a for a in result.attempts if a.action is Action.DRAIN][-1]
    assert "GPU 6 quarantined; evicted 1 pods using it: ['infer-6-0']" in drain.detail
    [continued] = state.escalations
    assert continued.kind == "continued" and continued.to_rung == 0
    assert "the rungs below were done" not in continued.describe()
    sim = fleet.node(NODE)
    left = [p.name for p in sim.pods if p.uses_gpus]
    assert "infer-6-0" not in left and "infer-1-0" not in left and len(left) == 6
    assert sim.quarantined == {} and not sim.unschedulable  # both GPUs back, never cordoned
