"""The Fabric Manager check: systemd's word on nvidia-fabricmanager (``systemctl show
--property=LoadState,ActiveState,SubState``, systemctl(1): "name=value" lines), read only on
a node whose GPUs have an NVSwitch fabric, and fail closed when it cannot be read.

The states are systemd's: NVSentinel issue 883 shows a killed Fabric Manager that failed to
start again (``Active: failed (Result: exit-code)`` in ``systemctl status``, which ``show``
prints as ``ActiveState=failed``, ``SubState=failed``); a service systemd restarts after a
crash waits in ``activating (auto-restart)``; a unit systemd does not know prints
``LoadState=not-found`` and exits 0 (the GPU operator's driver container runs Fabric Manager,
out of the host systemd's sight)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import replace

import pytest

from adapters.host.services import SystemdUnit, parse_show
from adapters.sim import SimFleet
from remedy.core.models import Action, ComponentKind, ProbeReport
from remedy.detection.probe import probe_node
from remedy.detection.probe.fabric_manager import FABRIC_MANAGER_DOWN, FABRIC_MANAGER_UNKNOWN
from remedy.detection.probe.services import ServiceState, ServiceUnreadable

NODE = "gpu-node-000"
RUNNING = "LoadState=loaded\nActiveState=active\nSubState=running\n"
FAILED = "LoadState=loaded\nActiveState=failed\nSubState=failed\n"  # NVSentinel issue 883
CRASH_LOOP = "LoadState=loaded\nActiveState=activating\nSubState=auto-restart\n"
STARTING = "LoadState=loaded\nActiveState=activating\nSubState=start\n"
NOT_INSTALLED = "LoadState=not-found\nActiveState=inactive\nSubState=dead\n"


def answers(status: int, output: str) -> SystemdUnit:
    def run(command: Sequence[str], timeout_s: float) -> tuple[int, str]:
        assert list(command) == [
            "systemctl",
            "show",
            "--property=LoadState,ActiveState,SubState",
            "nvidia-fabricmanager",
        ]
        return status, output

    return SystemdUnit(run=run)


def raises(exc: Exception) -> SystemdUnit:
    def run(command: Sequence[str], timeout_s: float) -> tuple[int, str]:
        raise exc

    return SystemdUnit(run=run)


def probe(fleet: SimFleet, unit: SystemdUnit) -> ProbeReport:
    host = fleet.host(NODE)
    return probe_node(NODE, host.nvml(), replace(host.probe_config, fabric_manager=unit))


def fm(report: ProbeReport) -> list[str]:
    return [f.reason for f in report.findings if f.check == "fabric_manager"]


@pytest.fixture
def fleet() -> SimFleet:
    return SimFleet(nodes=1, gpus_per_node=2)


def test_systemctl_shows_the_three_states() -> None:
    assert parse_show(FAILED) == ServiceState("loaded", "failed", "failed")
    assert parse_show(RUNNING + "\n") == ServiceState("loaded", "active", "running")
    with pytest.raises(ServiceUnreadable, match="printed no SubState"):
        parse_show("LoadState=loaded\nActiveState=active\n")


@pytest.mark.parametrize(
    ("output", "reasons"),
    [
        (RUNNING, []),
        (STARTING, []),  # a start under way: the fabric state says if it never ends
        (NOT_INSTALLED, []),  # the GPU operator's container runs it
        (FAILED, [FABRIC_MANAGER_DOWN]),
        (CRASH_LOOP, [FABRIC_MANAGER_DOWN]),
        ("LoadState=loaded\nActiveState=inactive\nSubState=dead\n", [FABRIC_MANAGER_DOWN]),
    ],
)
def test_fabric_manager_not_running_on_an_nvswitch_node_is_a_finding(
    fleet: SimFleet, output: str, reasons: list[str]
) -> None:
    report = probe(fleet, answers(0, output))
    assert fm(report) == reasons
    assert "fabric_manager" in report.checks_run
    if reasons:
        [down] = report.findings
        assert down.component.kind is ComponentKind.NODE and down.unhealthy


@pytest.mark.parametrize(
    ("unit", "says"),
    [
        (raises(subprocess.TimeoutExpired("systemctl", 5)), "did not answer in 5s"),
        (raises(FileNotFoundError("systemctl")), "systemctl is not installed here"),
        (raises(PermissionError("systemctl")), "permission denied"),
        (
            answers(1, "System has not been booted with systemd as init system (PID 1)."),
            "exited 1: System has not been booted with systemd",
        ),
        (answers(0, ""), "printed no LoadState, ActiveState, SubState"),
    ],
)
def test_a_state_that_cannot_be_read_fails_closed(
    fleet: SimFleet, unit: SystemdUnit, says: str
) -> None:
    report = probe(fleet, unit)
    assert fm(report) == [FABRIC_MANAGER_UNKNOWN]
    assert says in report.findings[0].evidence and not report.healthy


def test_a_node_without_an_nvswitch_fabric_does_not_need_it(fleet: SimFleet) -> None:
    fleet.node(NODE).nvswitch = False
    report = probe(fleet, raises(subprocess.TimeoutExpired("systemctl", 5)))
    assert report.healthy and "fabric_manager" in report.checks_run


def test_without_a_unit_to_watch_the_check_does_not_run(fleet: SimFleet) -> None:
    report = probe(fleet, answers(0, FAILED))
    assert "fabric_manager" in report.checks_run
    host = fleet.host(NODE)
    quiet = probe_node(NODE, host.nvml(), replace(host.probe_config, fabric_manager=None))
    assert "fabric_manager" not in quiet.checks_run


def test_the_simulated_fault_stops_it_and_its_restart_clears_it(fleet: SimFleet) -> None:
    fleet.inject(NODE, "fabric_manager_down", gpu=0)
    host = fleet.host(NODE)
    assert fm(probe_node(NODE, host.nvml(), host.probe_config)) == [FABRIC_MANAGER_DOWN]
    host.run_action(
        Action.RESTART_FABRIC_MANAGER, ["systemctl", "restart", "nvidia-fabricmanager"], "k1"
    )
    assert probe_node(NODE, host.nvml(), host.probe_config).healthy
