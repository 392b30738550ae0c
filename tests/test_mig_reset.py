"""The agent's GPU reset on a GPU in MIG mode: refused, with which instances and processes,
while any instance has processes (a reset destroys every instance); refused as well when NVML
cannot say (fail closed); run once every instance is idle. The real LocalHost and a real
nvidia-smi stand-in on PATH, over the twin's NVML with MIG calls (mode, MIG device handles,
their GPU instance ids and compute processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from adapters.sim import SimFleet
from adapters.sim.node import SimPod
from remedy.acting.gpu_use import GpuClaim
from remedy.core.errors import ActionFailed, TransientError
from tests.test_host_actions import NODE, assert_permanent, host, script, through_activity

pytestmark = pytest.mark.server  # nvidia-smi is a process

BAD = 3


@pytest.fixture
def resets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An nvidia-smi on PATH that logs each reset it is asked for."""
    log = tmp_path / "resets"
    script(tmp_path / "nvidia-smi", f'echo "$*" >> {log}')
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return log


def mig_fleet(busy: dict[int, int]) -> SimFleet:
    """GPU 3 in MIG mode with instances 1 and 2; ``busy`` maps an instance to its pods."""
    fleet = SimFleet(nodes=1)
    sim = fleet.node(NODE)
    gpu = sim.gpus[BAD]
    gpu.mig, gpu.mig_instances = True, [1, 2]
    sim.pods = [p for p in sim.pods if not p.uses_gpus] + [
        SimPod(f"mig-{i}-{n}", uses_gpus=True, gpus=(BAD,), via=GpuClaim.MIG, mig=f"GPU-I:{i:02d}")
        for i, pods in busy.items()
        for n in range(pods)
    ]
    return fleet


def test_a_reset_waits_while_a_mig_instance_has_processes(tmp_path: Path, resets: Path) -> None:
    local = host(tmp_path, mig_fleet({2: 1}), allow_reset=True)
    error = through_activity(local, "reset_gpu", [BAD])
    assert isinstance(error, ApplicationError)
    assert error.type == TransientError.__name__ and not error.non_retryable  # pods may be leaving
    assert f"MIG instances of GPU {BAD} on {NODE} are in use: GPU-I:02 (pid 4300)" in str(error)
    assert not resets.exists()  # nvidia-smi never asked


def test_a_reset_of_a_mig_gpu_runs_once_every_instance_is_idle(
    tmp_path: Path, resets: Path
) -> None:
    fleet = mig_fleet({2: 1})
    local = host(tmp_path, fleet, allow_reset=True)
    with pytest.raises(TransientError):
        local.reset_gpus([BAD], "k")
    fleet.node(NODE).pods = []  # the drain's pods left
    assert local.reset_gpus([BAD], "k") == f"reset GPU {BAD}"
    assert resets.read_text() == f"--gpu-reset -i {BAD}\n"


def test_instances_of_other_gpus_do_not_hold_a_reset(tmp_path: Path, resets: Path) -> None:
    local = host(tmp_path, mig_fleet({1: 2}), allow_reset=True)
    assert local.reset_gpus([5], "k") == "reset GPU 5"


def test_a_reset_is_refused_when_nvml_cannot_say_whether_instances_are_idle(
    tmp_path: Path, resets: Path
) -> None:
    fleet = mig_fleet({})
    fleet.break_nvml(NODE, "driver")
    error = through_activity(host(tmp_path, fleet, allow_reset=True), "reset_gpu", [BAD])
    assert_permanent(error, ActionFailed, f"not resetting GPU {BAD} on {NODE}: NVML cannot say")
    assert not resets.exists()


def test_the_twin_nvml_lists_mig_devices_as_the_agent_maps_them() -> None:
    """The same MIG calls the agent's pod-resources mapping makes (device UUIDs → GPU index)."""
    from adapters.host.pod_resources import device_ids

    ids = device_ids(mig_fleet({}).host(NODE).nvml())
    migs = [uuid for uuid, gpu in ids.items() if uuid.startswith("MIG-")]
    assert len(migs) == 2 and {ids[u] for u in migs} == {BAD}
