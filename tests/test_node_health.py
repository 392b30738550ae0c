"""Node conditions, NVML Xid events, the load test and the local host's safety switches."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.host.load_test import run_load_test
from adapters.host.local import LocalHost, boot_time
from adapters.sim import SimFleet
from remedy.core.errors import ActionRefused
from remedy.core.models import Finding, ProbeReport, Severity
from remedy.detection.conditions import GPU_NETWORK_PROBLEM, GPU_PROBLEM, conditions_from
from remedy.detection.probe import ProbeConfig
from remedy.detection.probe.diagnose import deep_diagnose
from remedy.detection.probe.throughput import slow_ranks
from remedy.detection.probe.xid_events import XidWatcher

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
NODE = "gpu-node-000"


def report(
    *findings: Finding, checks: tuple[str, ...] = ("inventory", "memory", "nic")
) -> ProbeReport:
    return ProbeReport(node=NODE, checks_run=list(checks), findings=list(findings), started_at=T0)


def finding(check: str, reason: str, severity: Severity = Severity.CRITICAL) -> Finding:
    return Finding(node=NODE, check=check, reason=reason, severity=severity, observed_at=T0)


def test_conditions_keep_their_transition_time_while_nothing_changes() -> None:
    first = conditions_from(report(), [], T0)
    assert [(c.type, c.status, c.reason) for c in first] == [
        (GPU_PROBLEM, "False", "NoGpuProblem"),
        (GPU_NETWORK_PROBLEM, "False", "NoGpuNetworkProblem"),
    ]
    later = conditions_from(report(), first, T0 + timedelta(minutes=5))
    assert all(c.last_transition_time == T0 for c in later)
    assert all(c.last_heartbeat_time == T0 + timedelta(minutes=5) for c in later)


def test_conditions_move_only_the_one_that_changed() -> None:
    first = conditions_from(report(), [], T0)
    sick = conditions_from(report(finding("nic", "NicPortDown")), first, T0 + timedelta(1))
    gpu, net = sick
    assert (gpu.status, gpu.last_transition_time) == ("False", T0)
    assert (net.status, net.reason, net.last_transition_time) == (
        "True",
        "NicPortDown",
        T0 + timedelta(1),
    )


def test_a_new_reason_is_a_transition_and_info_findings_are_not_problems() -> None:
    first = conditions_from(report(finding("memory", "EccUncorrectable")), [], T0)
    second = conditions_from(
        report(finding("inventory", "GpuFallenOffBus"), finding("memory", "Xid63", Severity.INFO)),
        first,
        T0 + timedelta(1),
    )
    assert second[0].reason == "GpuFallenOffBus"
    assert second[0].last_transition_time == T0 + timedelta(1)
    assert "Xid63" not in second[0].message


def test_a_probe_that_could_not_run_is_a_gpu_problem_and_says_nothing_of_nics() -> None:
    broken = report(finding("probe", "NvmlUnavailable"), checks=())
    [gpu] = conditions_from(broken, [], T0)
    assert (gpu.type, gpu.status, gpu.reason) == (GPU_PROBLEM, "True", "NvmlUnavailable")


def test_nvml_xid_events_are_pushed_with_the_gpu_and_catalog_severity() -> None:
    fleet = SimFleet(nodes=1)
    watcher = XidWatcher(NODE, fleet.host(NODE).nvml(), lambda: T0)
    assert watcher.start()
    assert watcher.wait(0.01) == []
    fleet.inject(NODE, "gpu_lost", gpu=6)
    fleet.inject(NODE, "app_xid", gpu=2)
    events = watcher.wait(1.0)
    assert [(f.xid, f.component.index, f.severity) for f in events] == [
        (79, 6, Severity.CRITICAL),
        (13, 2, Severity.WARNING),
    ]
    assert events[0].component.serial == fleet.node(NODE).gpus[6].serial
    watcher.stop()


def test_xid_watcher_reports_when_nvml_cannot_deliver_events() -> None:
    fleet = SimFleet(nodes=1)
    fleet.break_nvml(NODE, "driver")
    watcher = XidWatcher(NODE, fleet.host(NODE).nvml(), lambda: T0)
    assert watcher.start() is False  # the agent falls back to the probe and the kernel log
    assert watcher.wait(0.01) == []


def test_slow_rank_is_named() -> None:
    rates = dict.fromkeys(range(7), 700.0) | {7: 400.0}
    [problem] = slow_ranks(rates)
    assert problem.gpu == 7
    assert problem.evidence.startswith("GPU 7: 400 TFLOP/s is 57% of the median 700")
    assert slow_ranks({0: 700.0, 1: 650.0}) == []


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None or importlib.util.find_spec("cupy") is not None,
    reason="this checks the path for nodes without a compute library",
)
def test_load_test_without_a_compute_library_never_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dcgmi either
    for report in (
        run_load_test([0, 1]),
        LocalHost(NODE, ProbeConfig(expected_gpus=8)).load_test([]),
    ):
        assert not report.ran and report.engine == ""
        assert [p.reason.value for p in report.problems] == ["DiagnoseCouldNotRun"]


def test_deep_diagnose_finds_what_only_load_shows() -> None:
    fleet = SimFleet(nodes=1)
    fleet.inject(NODE, "mcu_halt", gpu=5)
    host = fleet.host(NODE)
    result = deep_diagnose(host, [], host.probe_config)
    assert not result.healthy
    assert result.checks_run[-1] == "load"
    assert [(f.reason, f.evidence) for f in result.findings] == [
        ("FailsUnderLoad", "GPU 5: compute error under sustained load")
    ]


def test_local_host_refuses_destructive_actions_unless_allowed() -> None:
    host = LocalHost(NODE, ProbeConfig(expected_gpus=8))
    with pytest.raises(ActionRefused, match="--allow-reset"):
        host.reset_gpus([0], "")
    with pytest.raises(ActionRefused, match="--allow-reboot"):
        host.reboot("")


@pytest.mark.server  # the reboot command runs as a process
def test_local_host_reboot_runs_the_configured_command(tmp_path: Path) -> None:
    marker = tmp_path / "rebooted"
    host = LocalHost(NODE, ProbeConfig(), allow_reboot=True, reboot_command=("touch", str(marker)))
    host.reboot("")
    assert marker.exists()


def test_boot_time_comes_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3\nbtime 1764400000\nprocesses 5\n")
    assert boot_time(stat) == datetime.fromtimestamp(1764400000, UTC)
    assert boot_time(tmp_path / "missing") is None
