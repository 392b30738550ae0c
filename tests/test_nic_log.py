"""mlx5 and EFA driver errors in the kernel log, on real lines; the simulated NIC faults, a
degraded port and a flapping link, each cleared by a reboot; NIC findings as the node's
GpuNetworkProblem condition.

Line sources:
- mlx5 command timeout: NVSentinel's syslog monitor test (``wait_func:1195:(pid 1967079):
  ENABLE_HCA(0x104) timeout``) and a ConnectX-5 SR-IOV report's dmesg (``wait_func:1203``);
  the string is linux drivers/net/ethernet/mellanox/mlx5/core/cmd.c's.
- mlx5 health: NVSentinel's NIC monitor design table (``poll_health:174: device's health
  compromised - reached miss count.``, health.c).
- port module: gpud components/infiniband kmsg matcher and NVSentinel (``Port module
  event[error]: module 0, Cable error, High Temperature``, events.c); ``module 0, absent`` is
  info, not an error.
- EFA: efa_com.c's ``ibdev_err_ratelimited(..., "Wait for completion (polling) timeout")``,
  printed with the ibdev printk prefix ``efa 0000:00:06.0 efa_0:`` (linux-rdma "Add ibdev
  printk helpers"); ENA prints the same words as ``ena ... eth0``; ``Failed to process command
  DEREG_MR`` after a process ends is expected (AWS Neuron troubleshooting guide).
- ACCESS_REG failures are noise on restricted PFs (gpud issue 1164): not matched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from adapters.sim import SimFleet
from remedy.core.models import Action, ComponentKind, Finding, ProbeReport, Severity
from remedy.detection.conditions import GPU_NETWORK_PROBLEM, GPU_PROBLEM, conditions_from
from remedy.detection.probe import probe_node
from remedy.detection.probe.nic_log import nic_log_findings

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
NODE = "gpu-node-000"


@pytest.mark.parametrize(
    ("line", "reason", "severity", "pci"),
    [
        (
            "mlx5_core 0000:03:00.0: wait_func:1195:(pid 1967079): ENABLE_HCA(0x104) timeout. "
            "Will cause a leak of a command resource",
            "Mlx5CommandTimeout",
            Severity.CRITICAL,
            "0000:03:00.0",
        ),
        (
            "[ 2989.756437] mlx5_core 0000:08:01.0: wait_func:1203:(pid 435): ENABLE_HCA(0x104) "
            "timeout. Will cause a leak of a command resource",
            "Mlx5CommandTimeout",
            Severity.CRITICAL,
            "0000:08:01.0",
        ),
        (
            "mlx5_core 0000:d2:00.0: poll_health:174: device's health compromised - reached "
            "miss count.",
            "Mlx5HealthCompromised",
            Severity.CRITICAL,
            "0000:d2:00.0",
        ),
        (
            "kernel: [123.456794] mlx5_core 0000:5c:00.0: Port module event[error]: module 0, "
            "Cable error, High Temperature",
            "NicModuleError",
            Severity.INFO,
            "0000:5c:00.0",
        ),
        (
            "efa 0000:00:06.0 efa_0: Wait for completion (polling) timeout",
            "EfaAdminTimeout",
            Severity.CRITICAL,
            "0000:00:06.0",
        ),
    ],
)
def test_driver_errors_are_findings_about_the_nic(
    line: str, reason: str, severity: Severity, pci: str
) -> None:
    [finding] = nic_log_findings("n1", [line], None, NOW)
    assert (finding.check, finding.reason, finding.severity) == ("nic_driver", reason, severity)
    assert finding.component.kind is ComponentKind.NIC
    assert finding.component.pci_bus_id == pci
    assert finding.evidence.startswith(("mlx5_core", "efa"))


@pytest.mark.parametrize(
    "line",
    [
        "mlx5_core 0000:12:00.0: Port module event: module 0, absent",
        "ena 0000:00:05.0 eth0: Wait for completion (polling) timeout",
        "[298850.919248] efa 0000:a0:1a.0 rdmap160s26: Failed to process command DEREG_MR "
        "(opcode 8) comp_status 7 err -22",
        "mlx5_core 0000:d2:00.0: mlx5_cmd_out_err:838:(pid 1441871): ACCESS_REG(0x805) "
        "op_mod(0x1) failed, status bad operation(0x2), syndrome (0x305684), err(-22)",
        "mlx5_core 0000:04:00.0 enp4s0f0np0: Link up",
        # Another program quoting the driver is not the driver (logger, an agent's echo).
        "Dec  1 03:00:00 host root: mlx5_core 0000:03:00.0: wait_func:1: X(0x1) timeout. "
        "Will cause a leak of a command resource",
    ],
)
def test_lines_that_are_not_nic_faults(line: str) -> None:
    assert nic_log_findings("n1", [line], None, NOW) == []


def test_a_line_from_an_earlier_boot_is_skipped() -> None:
    boot = NOW - timedelta(minutes=5)
    old = (
        "2026-12-07T11:50:00+00:00 h kernel: mlx5_core 0000:03:00.0: poll_health:174: "
        "device's health compromised - reached miss count."
    )
    new = old.replace("11:50:00", "11:58:00")
    [finding] = nic_log_findings("n1", [old, new], boot, NOW)
    assert finding.observed_at == datetime(2026, 12, 7, 11, 58, tzinfo=UTC)


def test_the_probe_reads_them_from_the_kernel_log_beside_the_xids() -> None:
    # A generous check timeout: a busy CI machine must not turn this into CheckTimedOut.
    fleet = SimFleet(nodes=1, gpus_per_node=2, check_timeout_s=5.0)
    fleet.log_kernel(NODE, "efa 0000:00:06.0 efa_0: Wait for completion (polling) timeout")
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), host.probe_config)
    assert [(f.check, f.reason) for f in report.findings] == [("nic_driver", "EfaAdminTimeout")]


@pytest.mark.parametrize(
    ("fault", "check", "reason"),
    [("nic_degraded", "nic", "NicRateDegraded"), ("nic_flapping", "nic_link", "NicLinkFlapping")],
)
def test_a_simulated_nic_fault_is_seen_until_a_reboot_clears_it(
    fault: str, check: str, reason: str
) -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=8, check_timeout_s=5.0)
    reported = fleet.inject(NODE, fault, 5)
    assert (reported.check, reported.reason, reported.component.device) == (
        check,
        reason,
        "mlx5_5/1",
    )
    host = fleet.host(NODE)
    for _ in range(2):  # every re-probe in the tolerance window sees it
        probed = probe_node(NODE, host.nvml(), host.probe_config)
        assert [(f.reason, f.component.device) for f in probed.findings] == [(reason, "mlx5_5/1")]
    host.run_action(Action.DRAIN, ["drain"], "k-drain")  # a drain does not fix a link
    assert not probe_node(NODE, host.nvml(), host.probe_config).healthy
    host.reboot("k-reboot")
    assert probe_node(NODE, host.nvml(), host.probe_config).healthy


@pytest.mark.parametrize(
    ("check", "reason"),
    [
        ("nic_link", "NicLinkFlapping"),
        ("nic_driver", "Mlx5CommandTimeout"),
        ("nic", "NicBelowPeers"),
    ],
)
def test_every_nic_check_is_a_network_problem_not_a_gpu_problem(check: str, reason: str) -> None:
    report = ProbeReport(
        node=NODE,
        checks_run=["inventory", "nic", "nic_link"],
        findings=[
            Finding(
                node=NODE, check=check, reason=reason, severity=Severity.CRITICAL, observed_at=NOW
            )
        ],
        started_at=NOW,
    )
    gpu, network = conditions_from(report, [], NOW)
    assert (gpu.type, gpu.status) == (GPU_PROBLEM, "False")
    assert (network.type, network.status, network.reason) == (GPU_NETWORK_PROBLEM, "True", reason)
