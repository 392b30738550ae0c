"""The DCGM health check: ``dcgmi health -c -j`` read into findings per GPU and system, and fail
closed on a dcgmi that hangs, fails, prints what is not its report, or has no watches set.

Samples: tests/data/dcgm/health_*.json, in the JSON that dcgmi writes (NVIDIA/DCGM 4.6.0
``dcgmi/Health.cpp`` and ``dcgmi/DcgmiOutput.h``; tests/data/dcgm/README.md says what is whose),
with DCGM's own messages (``dcgmlib/dcgm_errors.h``). "Health watches not enabled" is dcgmi's
own error (``Health::CheckWatches``), as NVIDIA/DCGM issue #176 quotes it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.host.dcgm_health import DcgmiHealth
from adapters.host.provider import HostSettings
from adapters.sim import SimFleet
from remedy.core.models import ComponentKind, Finding, ProbeReport, Severity
from remedy.detection.probe import probe_node
from remedy.detection.probe.dcgm_health import (
    DCGM_HEALTH,
    NOT_WATCHED,
    NVSWITCH_FATAL,
    OTHER,
    UNREADABLE,
    Incident,
    classify,
    parse_health,
)
from remedy.detection.probe.dcgm_sources import HealthUnreadable
from remedy.runbook import RunbookSet
from remedy.runbook.schema import FROM_CONDITION

DATA = Path(__file__).parent / "data" / "dcgm"
HEALTHY = (DATA / "health_healthy.json").read_text()
FAULTY = (DATA / "health_gpu0_pcie_gpu1_memory_switch.json").read_text()
NOT_ENABLED = "Error: Health watches not enabled. Please enable watches. \n"
NODE = "gpu-node-000"


class Dcgmi:
    """dcgmi as the host runs it: each command's answer, and the commands it was given."""

    def __init__(self, *answers: tuple[int | None, str]) -> None:
        self.answers, self.ran = list(answers), list[list[str]]()

    def __call__(self, command: Sequence[str], timeout_s: float) -> tuple[int | None, str]:
        assert timeout_s == 4.0
        self.ran.append(list(command))
        return self.answers.pop(0)


def probe(dcgmi: Dcgmi, host: str = "") -> ProbeReport:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    sim = fleet.host(NODE)
    config = replace(sim.probe_config, dcgm_health=DcgmiHealth(host=host, run=dcgmi))
    return probe_node(NODE, sim.nvml(), config)


def dcgm(report: ProbeReport) -> list[tuple[str, Severity, str]]:
    return [
        (f.reason, f.severity, f.component.describe())
        for f in report.findings
        if f.check == DCGM_HEALTH.check
    ]


def test_healthy_is_no_incident() -> None:
    assert parse_health(HEALTHY) == []
    report = probe(Dcgmi((0, HEALTHY)), host="10.0.0.7:5555")
    assert report.healthy and DCGM_HEALTH.check in report.checks_run


def test_each_incident_is_a_finding_on_its_gpu_and_system() -> None:
    incidents = parse_health(FAULTY)
    assert Incident("GPU", "0", "PCIe system", "Warning", _pcie()) in incidents
    memory = next(i for i in incidents if i.system == "Memory system")
    # Two incidents of one system are one message, cut by dcgmi at 54 characters.
    assert memory.message == (
        "Detected 2 volatile double-bit ECC error(s) in GPU 1., GPU 1 had uncorrectable "
        "memory errors and row remapping failed."
    )
    report = probe(Dcgmi((0, FAULTY)))
    assert not report.healthy
    found = dcgm(report)
    gpu0, gpu1 = (g.describe() for g in sorted(report.gpus, key=lambda g: g.index or 0))
    assert ("DcgmHealthPcie", Severity.WARNING, gpu0) in found
    assert ("DcgmHealthMemory", Severity.CRITICAL, gpu1) in found  # Failure
    assert ("DcgmHealthInforom", Severity.WARNING, gpu1) in found
    # The NVSwitch watches have no system name in dcgmi ("Internal error"): node-wide.
    switch = next(f for f in report.findings if f.reason == NVSWITCH_FATAL)
    assert switch.component.kind is ComponentKind.NODE and switch.severity is Severity.CRITICAL
    assert "Switch 0" in switch.evidence and "NvSwitch 0 link 12" in switch.evidence


def test_what_remedys_own_readers_route_is_recorded_not_acted_on() -> None:
    """An Xid (31, an application's MMU fault, is a Memory incident to DCGM), the driver's
    recovery action (the memory check routes it by value from NVML) and a non-fatal NVSwitch
    error (as a non-fatal SXid) are informational: routed by DCGM's system, an application's
    Xid would reset a GPU."""
    report = probe(Dcgmi((0, (DATA / "health_gpu2_recorded.json").read_text())))
    found = sorted((r, s) for r, s, _ in dcgm(report))
    assert found == [
        ("DcgmHealthDriver", Severity.INFO),
        ("DcgmHealthNvSwitchNonFatal", Severity.INFO),
        ("DcgmHealthXid", Severity.INFO),
        ("DcgmHealthXid", Severity.INFO),
    ]
    assert report.healthy
    # Joined with a fault that is not an Xid, the incident is the system's.
    mixed = Incident(
        "GPU",
        "1",
        "Memory system",
        "Failure",
        "Detected XID 31 for GPU 1, Detected 2 volatile double-bit ECC error(s) in GPU 1.",
    )
    assert classify(mixed) == ("DcgmHealthMemory", Severity.CRITICAL)
    both = Incident(
        "Switch",
        "0",
        "Internal error",
        "Failure",
        "Detected fatal errors on NvSwitch 0 link 12, Detected nonfatal errors on NvSwitch 0 "
        "link 3",
    )
    assert classify(both) == (NVSWITCH_FATAL, Severity.CRITICAL)


def _pcie() -> str:
    return "Detected more than 8 PCIe replays per minute for GPU 0 : 13"


def test_no_watches_set_is_said_and_set_once() -> None:
    dcgmi = Dcgmi((255, NOT_ENABLED), (0, "Health monitor systems set successfully.\n"))
    report = probe(dcgmi, host="10.0.0.7:5555")
    assert dcgm(report) == [(NOT_WATCHED, Severity.WARNING, "node")]
    assert not report.healthy
    assert "set them now" in report.findings[0].evidence
    assert dcgmi.ran == [
        ["dcgmi", "health", "-c", "-j", "--host", "10.0.0.7:5555"],
        ["dcgmi", "health", "-s", "a", "--host", "10.0.0.7:5555"],
    ]


def test_watches_that_cannot_be_set_are_said() -> None:
    report = probe(Dcgmi((255, NOT_ENABLED), (None, "")))
    assert dcgm(report) == [(NOT_WATCHED, Severity.WARNING, "node")]
    assert "setting them failed" in report.findings[0].evidence


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((None, ""), "did not answer within 4s"),  # hung: killed with its process group
        # dcgmi/Command.cpp's words when the host engine is not there:
        (
            (
                255,
                "Error: unable to establish a connection to the specified host: localhost\n"
                "Error: Unable to connect to host engine. "
                "Host engine connection invalid/disconnected.\n",
            ),
            "exited 255",
        ),
        ((127, "cannot run dcgmi: [Errno 2] No such file or directory"), "exited 127"),
        ((0, "Health Monitor Report\n"), "no 'Overall Health'"),  # not its JSON
        ((0, '{"body": {"Overall Health": {"value": "Failure"}}}'), "names no incident"),
    ],
)
def test_a_dcgmi_that_fails_is_a_finding_never_healthy(
    answer: tuple[int | None, str], said: str
) -> None:
    report = probe(Dcgmi(answer))
    assert dcgm(report) == [(UNREADABLE, Severity.WARNING, "node")]
    assert said in report.findings[0].evidence
    assert not report.healthy


def test_an_unknown_result_is_the_worst() -> None:
    text = FAULTY.replace('"value" : "Warning"', '"value" : "Internal error"', 1)
    report = probe(Dcgmi((0, text)))
    assert ("DcgmHealthPcie", Severity.CRITICAL) in [(r, s) for r, s, _ in dcgm(report)]


def test_not_asked_not_read() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), host.probe_config)
    assert DCGM_HEALTH.check not in report.checks_run


def test_unparseable_raises() -> None:
    with pytest.raises(HealthUnreadable):
        parse_health("")


@pytest.mark.parametrize(
    ("reason", "runbook"),
    [
        ("DcgmHealthMemory", "gpu-memory-ecc"),  # the same fault as the memory check's
        ("DcgmHealthPcie", "pcie-degraded"),
        ("DcgmHealthThermal", "thermal"),
        ("DcgmHealthPower", "thermal"),
        ("DcgmHealthNvlink", "nvlink-errors"),
        ("DcgmHealthInforom", "xid-needs-a-person"),
        ("DcgmHealthConnectx", "nic-driver"),
        (NVSWITCH_FATAL, "nvswitch"),
        (UNREADABLE, "gpu-monitor-blind"),
        (NOT_WATCHED, "gpu-monitor-blind"),
        ("DcgmExporterUnreadable", "gpu-monitor-blind"),
        # What remedy cannot route from DCGM's words: the default, cordon and hold for a person.
        ("DcgmHealthDriver", "default-unknown-fault"),
        (OTHER, "default-unknown-fault"),
    ],
)
def test_each_dcgm_finding_goes_to_the_runbook_of_its_fault(
    shipped_runbooks: RunbookSet, reason: str, runbook: str
) -> None:
    check = "dcgm_exporter" if reason.startswith("DcgmExporter") else DCGM_HEALTH.check
    finding = Finding(
        node=NODE,
        check=check,
        reason=reason,
        severity=Severity.CRITICAL,
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        evidence="",
    )
    matched = shipped_runbooks.match(finding)
    assert (matched.name if matched else None) == runbook
    # A finding the fleet scan rebuilds from the node's condition keeps only its reason.
    rebuilt = shipped_runbooks.match(finding.model_copy(update={"check": FROM_CONDITION}))
    assert (rebuilt.name if rebuilt else None) == runbook


def test_dcgmi_is_killed_within_the_checks_own_limit() -> None:
    """A hung dcgmi is this check's finding (run_bounded kills it and its children), not a
    timed-out check, whose runbook (probe-failure) reboots: its limit is under the probe's."""
    for limit in (5.0, 1.0):
        config = HostSettings(node=NODE, timeout=limit, dcgm_health=True).probe_config()
        assert isinstance(config.dcgm_health, DcgmiHealth)
        assert config.dcgm_health.timeout_s < config.check_timeout_s == limit


def test_the_simulated_node_answers_as_dcgmi_does() -> None:
    """The twin's DCGM (adapters/sim/dcgm.py) prints dcgmi's shape from its faults: the check
    reads it as it reads dcgmi, and an ECC fault takes the memory runbook either way."""
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.nodes[NODE].dcgm_health = True
    host = fleet.host(NODE)
    assert probe_node(NODE, host.nvml(), host.probe_config).healthy
    fleet.inject(NODE, "ecc_dbe", gpu=1)
    report = probe_node(NODE, host.nvml(), host.probe_config)
    assert ("DcgmHealthMemory", Severity.CRITICAL) in [(r, s) for r, s, _ in dcgm(report)]
    assert parse_health(fleet.nodes[NODE].dcgm_health_report())[0].entity == "1"
