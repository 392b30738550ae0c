"""An Xid on a MIG instance (``GPU-I:nn`` in its kernel-log line) names the instance in its
finding, and a GPU-scoped rung on it stops only the pods on that instance: the GPU's other
instances keep serving. Where the node's GPU use does not say which instance a pod has, the
rung takes every pod of the GPU (fail safe). The twin on the time-skipping server; the finding
comes from the real probe reading the twin's kernel log."""

from __future__ import annotations

import doctest
from dataclasses import replace

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.node import SimPod
from remedy.acting import gpu_scope
from remedy.acting.gpu_use import GpuClaim
from remedy.core.models import Action, Finding, Scope
from remedy.detection.probe import probe_node
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.ladder import remediate

NODE = "gpu-node-001"
BAD = 3  # its PCI bus is 0x48 in the twin's NVML
# NVIDIA's contained-error line, on the twin's GPU 3, instance 2.
XID_ON_INSTANCE_2 = (
    "NVRM: Xid (PCI:0000:48:00 GPU-I:02 GPU-CI:00): 94, pid=7194, name=python, "
    "Contained: CE User Channel (0x9). RST: No, D-RST: No"
)


def mig_pods(fleet: SimFleet, instance_names: tuple[str, str]) -> list[str]:
    """Two MIG instances on each GPU, one pod on each, named as the node's GPU use names them."""
    pods = [
        SimPod(f"mig-{g}-{n}", uses_gpus=True, gpus=(g,), via=GpuClaim.MIG, mig=name)
        for g in range(8)
        for n, name in enumerate(instance_names)
    ]
    sim = fleet.node(NODE)
    sim.pods = [p for p in sim.pods if not p.uses_gpus] + pods
    return [p.name for p in pods]


def finding_from_log(fleet: SimFleet) -> Finding:
    fleet.log_kernel(NODE, XID_ON_INSTANCE_2)
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), replace(host.probe_config))
    [finding] = [f for f in report.findings if f.check == "xid"]
    return finding


def kill_on_the_gpu() -> Runbook:
    return Runbook(
        name="mig-app-fault",
        match=Match(xids=[94]),
        cordon=False,
        ladder=[Rung(action=Action.KILL_JOB, scope=Scope.GPU)],
    )


def test_an_xid_on_a_mig_instance_names_it_in_its_finding(fleet: SimFleet) -> None:
    finding = finding_from_log(fleet)
    assert (finding.xid, finding.component.index, finding.gpu_instance) == (94, BAD, 2)


@pytest.mark.parametrize(
    ("names", "stopped"),
    [
        (("GPU-I:01", "GPU-I:02"), [f"mig-{BAD}-1"]),  # the instance the Xid named only
        # MIG device UUIDs: which instance is not known, so every pod of the GPU
        (("MIG-5e1c0f6a", "MIG-9b07d2aa"), [f"mig-{BAD}-0", f"mig-{BAD}-1"]),
    ],
    ids=["instance-known", "instance-unknown"],
)
async def test_a_gpu_scoped_kill_on_a_mig_xid_stops_only_that_instances_pods(
    time_env: WorkflowEnvironment,
    fleet: SimFleet,
    names: tuple[str, str],
    stopped: list[str],
) -> None:
    pods = mig_pods(fleet, names)
    finding = finding_from_log(fleet)

    ran = await remediate(time_env, fleet, finding, kill_on_the_gpu())

    assert ran.result.outcome is Outcome.RECOVERED, ran.result.detail
    left = [p.name for p in fleet.node(NODE).pods if p.uses_gpus]
    assert left == [p for p in pods if p not in stopped]
    kill = next(a for a in ran.state.attempts if a.action is Action.KILL_JOB)
    assert kill.result is AttemptResult.VERIFIED
    assert f"deleted {len(stopped)} pods" in kill.detail
    assert not fleet.node(NODE).unschedulable  # the node kept serving


def test_the_worked_examples_of_which_pods_a_gpu_scoped_rung_takes() -> None:
    assert doctest.testmod(gpu_scope).failed == 0
