"""The deep diagnose end to end: DCGM's verdict becomes findings on the right GPU (with its
serial from the inventory) and the report names the engine; a load test that could not run
fails the node; and the ladder's diagnose covers every GPU, not only those the findings named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.host.load_test import LoadTestConfig, run_load_test
from adapters.sim import SimFleet
from remedy.core.models import Action, ComponentKind
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.diagnose import deep_diagnose
from remedy.detection.probe.load import LoadReport
from remedy.detection.probe.runner import ProbeConfig
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from remedy.scan.admission import diagnose_detail
from tests.ladder import remediate
from tests.test_load_test import FIXTURES, V4_FAIL, V4_SKIPPED, fake_dcgmi

pytestmark = pytest.mark.server  # a fake dcgmi runs as a process

NODE = "gpu-node-001"


class DcgmNode:
    """A simulated node's NVML with the real load test (DCGM through a fake dcgmi)."""

    def __init__(self, fleet: SimFleet, config: LoadTestConfig) -> None:
        self.name = next(iter(fleet.nodes))
        self._sim, self._config = fleet.host(self.name), config

    @property
    def probe_config(self) -> ProbeConfig:
        return self._sim.probe_config

    def nvml(self) -> NvmlApi:
        return self._sim.nvml()

    def reset_gpus(self, indices: list[int], key: str) -> str:
        raise AssertionError("a diagnose resets nothing")

    def reboot(self, key: str) -> str:
        raise AssertionError("a diagnose reboots nothing")

    def load_test(self, indices: list[int]) -> LoadReport:
        return run_load_test(indices or list(range(8)), self._config)


@pytest.fixture
def dcgm_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> DcgmNode:
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return DcgmNode(SimFleet(nodes=1), LoadTestConfig())


def test_dcgm_failure_is_a_finding_on_that_gpu_with_its_serial(
    dcgm_node: DcgmNode, tmp_path: Path
) -> None:
    fake_dcgmi(tmp_path, f"cat {V4_FAIL}; exit 226")
    report = deep_diagnose(dcgm_node, [], dcgm_node.probe_config)
    assert not report.healthy and report.load_engine == "dcgm"
    failed, slow = report.findings
    assert (failed.check, failed.reason, failed.component.index) == ("load", "DcgmDiagFailed", 3)
    assert failed.component.kind is ComponentKind.GPU and failed.component.serial
    assert (slow.reason, slow.component.index) == ("SlowRank", 5)
    assert diagnose_detail(report).startswith("DcgmDiagFailed on GPU 3 (")


def test_a_passing_diagnose_names_its_engine(dcgm_node: DcgmNode, tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, f"cat {FIXTURES / 'v4_r3_pass.json'}")
    report = deep_diagnose(dcgm_node, [], dcgm_node.probe_config)
    assert report.healthy
    assert diagnose_detail(report).endswith(", load (dcgm)")


def test_a_diagnose_that_could_not_run_fails_the_node(dcgm_node: DcgmNode, tmp_path: Path) -> None:
    fake_dcgmi(tmp_path, "echo 'not json'")
    report = deep_diagnose(dcgm_node, [], dcgm_node.probe_config)
    assert not report.healthy
    [finding] = report.findings
    assert (finding.reason, finding.component.kind) == ("DiagnoseCouldNotRun", ComponentKind.NODE)


def test_a_gpu_dcgm_skipped_fails_the_node_on_that_gpu(dcgm_node: DcgmNode, tmp_path: Path) -> None:
    """No torch or cupy here: the GPU DCGM did not test is untested, not healthy."""
    fake_dcgmi(tmp_path, f"cat {V4_SKIPPED}")
    report = deep_diagnose(dcgm_node, [], dcgm_node.probe_config)
    assert not report.healthy and report.load_engine == "dcgm"
    [finding] = report.findings
    assert (finding.reason, finding.component.index) == ("DiagnoseCouldNotRun", 5)
    assert finding.component.kind is ComponentKind.GPU and finding.component.serial


async def test_the_ladders_diagnose_covers_gpus_the_findings_did_not_name(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """An application Xid on GPU 6 is diagnosed; GPU 2, which nothing reported, fails under
    load. Before, the diagnose tested GPU 6 alone and called the node recovered."""
    fleet.inject(NODE, "mcu_halt", gpu=2)
    finding = fleet.inject(NODE, "app_xid", gpu=6)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.NEEDS_HUMAN
    [(action, result)] = ran.ladder
    assert (action, result) == (Action.DIAGNOSE, AttemptResult.FAILED)
    [attempt] = [a for a in ran.result.attempts if a.action is Action.DIAGNOSE]
    assert "GPU 2: compute error under sustained load" in attempt.detail
