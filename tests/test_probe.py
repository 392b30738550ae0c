"""The real probe code through the simulated NVML (pynvml's names, shapes and exceptions)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.host.kernel_log import KernelLogTail
from adapters.host.nics import SysfsNics
from adapters.sim import SimFleet
from remedy.core.models import ComponentKind, ProbeReport, Severity
from remedy.detection.probe import probe_node
from remedy.detection.probe.checks import GPU_CHECKS
from remedy.detection.probe.nic_counters import EFA_COUNTERS, IB_COUNTERS
from workers.cli import app

NODE = "gpu-node-000"


def probe(fleet: SimFleet, **overrides: object) -> ProbeReport:
    host = fleet.host(NODE)
    return probe_node(NODE, host.nvml(), replace(host.probe_config, **overrides))


def reasons(report: ProbeReport) -> list[tuple[str, str, int | None]]:
    return [(f.check, f.reason, f.component.index) for f in report.findings]


@pytest.fixture
def fleet() -> SimFleet:
    return SimFleet(nodes=1, gpus_per_node=8, check_timeout_s=0.5)


def test_healthy_8_gpu_node_is_healthy_and_names_every_gpu(fleet: SimFleet) -> None:
    report = probe(fleet)
    assert report.healthy
    assert report.findings == []
    assert report.checks_run == ["inventory", *GPU_CHECKS, "fabric_manager", "nic", "nic_link"]
    assert [g.index for g in report.gpus] == list(range(8))
    assert all(g.uuid and g.serial and g.pci_bus_id for g in report.gpus)
    assert len({g.serial for g in report.gpus}) == 8


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (
            "ecc_dbe",
            [
                ("memory", "EccUncorrectable", 2),
                ("memory", "RowRemapPending", 2),
                ("memory", "RecoveryActionGpuReset", 2),
            ],
        ),
        ("remap_failure", [("memory", "RowRemapFailure", 2)]),
        ("gpu_lost", [("inventory", "GpuFallenOffBus", 2)]),
        (
            "thermal_transient",
            [("thermal", "HwThermalSlowdown", 2), ("thermal", "GpuOverTemperature", 2)],
        ),
        ("pcie_degraded", [("pcie", "PcieWidthDegraded", 2)]),
        ("nvlink_down", [("nvlink", "NvLinkDown", 2)]),
        ("nic_down", [("nic", "NicPortDown", None)]),
        ("nic_degraded", [("nic", "NicRateDegraded", None)]),
        ("nic_flapping", [("nic_link", "NicLinkFlapping", None)]),
    ],
)
def test_each_fault_gives_its_finding(
    fleet: SimFleet, fault: str, expected: list[tuple[str, str, int | None]]
) -> None:
    fleet.inject(NODE, fault, 2)
    report = probe(fleet)
    assert not report.healthy
    assert sorted(reasons(report)) == sorted(expected)


def test_findings_carry_the_gpu_identity(fleet: SimFleet) -> None:
    fleet.inject(NODE, "remap_failure", 5)
    [finding] = probe(fleet).findings
    gpu = fleet.node(NODE).gpus[5]
    assert finding.component.kind is ComponentKind.GPU
    assert (finding.component.serial, finding.component.uuid) == (gpu.serial, gpu.uuid)
    assert finding.component.pci_bus_id


def test_fault_only_visible_under_load_passes_the_probe(fleet: SimFleet) -> None:
    fleet.inject(NODE, "mcu_halt", 1)  # answers every query: only the deep diagnose finds it
    assert probe(fleet).healthy


def test_hanging_nvml_call_is_unhealthy_within_the_timeout(fleet: SimFleet) -> None:
    fleet.inject(NODE, "gpu_hang", 4)
    started = time.perf_counter()
    report = probe(fleet)
    assert time.perf_counter() - started < 2.0  # 0.5 s per check, not forever
    assert not report.healthy
    assert ("probe", "CheckTimedOut", None) in reasons(report)
    assert "inventory" not in report.checks_run


def test_hanging_nvml_init_is_unhealthy(fleet: SimFleet) -> None:
    fleet.break_nvml(NODE, "hang")
    report = probe(fleet)
    assert not report.healthy
    assert reasons(report)[0] == ("probe", "NvmlUnavailable", None)
    assert "TimeoutError" in report.findings[0].evidence


@pytest.mark.parametrize(
    ("how", "error"),
    [("missing", "NVMLError_LibraryNotFound"), ("driver", "NVMLError_DriverNotLoaded")],
)
def test_nvml_that_cannot_load_is_unhealthy_never_empty(
    fleet: SimFleet, how: str, error: str
) -> None:
    fleet.break_nvml(NODE, how)
    report = probe(fleet, nics=None)
    assert not report.healthy
    assert report.checks_run == []  # nothing ran: never a pass
    [finding] = report.findings
    assert (finding.reason, finding.severity) == ("NvmlUnavailable", Severity.CRITICAL)
    assert error in finding.evidence


def test_missing_gpus_are_counted_against_the_expected_number(fleet: SimFleet) -> None:
    report = probe(fleet, expected_gpus=10)
    assert ("inventory", "GpuMissing", None) in reasons(report)


def test_node_without_gpus_skips_nvml(fleet: SimFleet) -> None:
    fleet.break_nvml(NODE, "missing")
    report = probe(fleet, expected_gpus=0)
    assert report.healthy and report.checks_run == ["nic", "nic_link"]


def test_broken_check_is_a_finding_not_a_crash(fleet: SimFleet) -> None:
    host = fleet.host(NODE)
    nvml = host.nvml()

    def broken(handle: int, sensor: int) -> int:
        raise RuntimeError("driver returned garbage")

    nvml.nvmlDeviceGetTemperature = broken  # type: ignore[method-assign]
    report = probe_node(NODE, nvml, host.probe_config)
    assert not report.healthy
    assert "thermal" not in report.checks_run
    [failed] = [f for f in report.findings if f.reason == "CheckFailed"]
    assert "check thermal failed: RuntimeError: driver returned garbage" == failed.evidence


def test_kernel_log_is_the_xid_source_when_nvml_is_broken(fleet: SimFleet, tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    boot = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
    log.write_text(
        "2026-11-29T05:59:00+00:00 n kernel: NVRM: Xid (PCI:0000:5a:00): 79, before the reboot\n"
        "2026-11-29T06:05:00+00:00 n kernel: NVRM: Xid (PCI:0000:5a:00): 48, pid=9, name=x, DBE\n"
    )
    tail = KernelLogTail(log, tmp_path / "cursor.json")
    fleet.break_nvml(NODE, "driver")
    report = probe(fleet, kernel_log=tail, not_before=boot, nics=None)
    assert not report.healthy
    assert report.checks_run == ["kernel_log"]
    assert [(f.reason, f.xid) for f in report.findings] == [
        ("NvmlUnavailable", None),
        ("Xid48", 48),
    ]
    # Each line is handled once, also by a new reader that picks the cursor up.
    again = probe(
        fleet, kernel_log=KernelLogTail(log, tmp_path / "cursor.json"), not_before=boot, nics=None
    )
    assert [f.reason for f in again.findings] == ["NvmlUnavailable"]


def test_kernel_log_tail_restarts_after_rotation(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("one\ntwo\npart")
    tail = KernelLogTail(log, tmp_path / "cursor.json")
    assert tail.read_new() == ["one", "two"]  # a partial last line waits
    with log.open("a") as f:
        f.write("ial\n")
    assert tail.read_new() == ["partial"]
    log.unlink()
    log.write_text("fresh\n")  # rotated: a new file
    assert tail.read_new() == ["fresh"]


def _port(root: Path, device: str, state: str, phys: str, rate: str) -> None:
    port = root / device / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text(state + "\n")
    (port / "phys_state").write_text(phys + "\n")
    (port / "rate").write_text(rate + "\n")
    counters = port / ("hw_counters" if device.startswith("rdmap") else "counters")
    counters.mkdir()
    for name in IB_COUNTERS if counters.name == "counters" else EFA_COUNTERS:
        (counters / name).write_text("0\n")


def test_rdma_nics_from_sysfs(tmp_path: Path, fleet: SimFleet) -> None:
    _port(tmp_path, "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)")
    _port(tmp_path, "mlx5_1", "1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)")
    _port(tmp_path, "rdmap16s27", "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)")  # EFA
    report = probe(fleet, nics=SysfsNics(tmp_path), expected_nics=4, expected_nic_rate_gbps=400.0)
    found = sorted((f.reason, f.component.device) for f in report.findings)
    assert found == [
        ("NicMissing", None),
        ("NicPortDown", "mlx5_1/1"),
        ("NicRateDegraded", "rdmap16s27/1"),
    ]


def test_no_infiniband_folder_on_a_node_that_expects_nics(tmp_path: Path, fleet: SimFleet) -> None:
    report = probe(fleet, nics=SysfsNics(tmp_path / "absent"), expected_nics=8)
    assert [f.reason for f in report.findings] == ["NicMissing"]


def test_report_times_come_from_the_clock_given(fleet: SimFleet) -> None:
    fleet.inject(NODE, "remap_failure", 0)
    at = datetime(2026, 1, 2, tzinfo=UTC)
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), host.probe_config, now=lambda: at)
    assert report.started_at == at and report.findings[0].observed_at == at


def test_the_probe_command_runs_the_deep_diagnose_with_deep() -> None:
    """What only load shows: the plain probe passes, the deep diagnose (the agent's own code)
    fails the GPU."""
    plain = CliRunner().invoke(app, ["probe", "--simulate", "mcu_halt", "--json"])
    deep = CliRunner().invoke(app, ["probe", "--simulate", "mcu_halt", "--deep", "--json"])
    assert plain.exit_code == 0 and deep.exit_code == 1, (plain.output, deep.output)
    report = ProbeReport.model_validate_json(deep.output)
    assert report.checks_run[-1] == "load"
    assert [(f.reason, f.component.index) for f in report.findings] == [("FailsUnderLoad", 0)]
