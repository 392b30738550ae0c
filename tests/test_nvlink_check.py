"""The probe's nvlink check through the simulated NVML (pynvml's names, its constants, the
seam's errors): each link's state against its peers, the error counters as rates against
DCGM's limits, fail closed on a counter that cannot be read, and the GPU's fabric health.

Sources of the values: the counters and their meaning are nvmlDeviceGetNvLinkErrorCounter's
(``NVML_NVLINK_ERROR_DL_REPLAY`` 0, ``_RECOVERY`` 1, ``_CRC_FLIT`` 2, ``_CRC_DATA`` 3, pynvml
13.615); the limits are DCGM's NVLink health watch (dcgm_gpu_hardware_limits.h:
``DCGM_LIMIT_MAX_NVLINK_CRC_ERROR`` 100.0 per second, ``DCGM_LIMIT_MAX_NVLINK_ERROR`` 1); the
health mask's fields are nvmlGpuFabricInfo_v2's (``NVML_GPU_FABRIC_HEALTH_MASK_*``)."""

from __future__ import annotations

import doctest
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from adapters.sim import SimFleet
from adapters.sim.nvml import HEALTHY_FABRIC, SimNvml
from remedy.core.models import ProbeReport, Severity
from remedy.detection import gpu as nv
from remedy.detection.probe import probe_node, rates
from remedy.detection.probe.nvlink import (
    CRC_RATE,
    FABRIC_DEGRADED,
    FABRIC_NOT_READY,
    FABRIC_UNHEALTHY,
    NVLINK_DOWN,
    RECOVERIES,
    REPLAYS,
    UNREADABLE,
)
from remedy.detection.probe.rates import CounterWindow

NODE = "gpu-node-000"
T0 = datetime(2026, 12, 7, 12, tzinfo=UTC)
Key = tuple[int, int, int]  # GPU, link, counter


class Links(SimNvml):
    """A simulated GPU table whose link states, counters and fabric info a test sets."""

    def __init__(self, fleet: SimFleet) -> None:
        super().__init__(fleet.node(NODE))
        self.counters: dict[Key, int] = {}
        self.inactive: set[tuple[int, int]] = set()
        self.unreadable: set[Key] = set()
        self.fabric: nv.GpuFabricInfo | None = None

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        super().nvmlDeviceGetNvLinkState(handle, link)  # links past the 18th: invalid argument
        return int(nv.NVML_FEATURE_DISABLED if (handle, link) in self.inactive else 1)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: int, link: int, counter: int) -> int:
        if (handle, link, counter) in self.unreadable:
            raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)
        return self.counters.get((handle, link, counter), 0)

    def gpu_fabric_info(self, handle: int) -> nv.GpuFabricInfo:
        return self.fabric or super().gpu_fabric_info(handle)


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def fleet() -> SimFleet:
    return SimFleet(nodes=1, gpus_per_node=2, check_timeout_s=5.0)


def probe(fleet: SimFleet, nvml: SimNvml, window: CounterWindow, now: Clock) -> ProbeReport:
    config = replace(fleet.host(NODE).probe_config, nvlink_window=window)
    return probe_node(NODE, nvml, config, now=now)


def found(report: ProbeReport) -> list[tuple[str, int | None, Severity]]:
    return [(f.reason, f.component.index, f.severity) for f in report.findings]


def twice(fleet: SimFleet, links: Links, change: dict[Key, int], after_s: float) -> ProbeReport:
    """A first probe fills the window; ``change`` lands; a second probe ``after_s`` later."""
    window, now = CounterWindow(first_gap_s=0.0), Clock()
    assert found(probe(fleet, links, window, now)) == []
    links.counters.update(change)
    now.at += timedelta(seconds=after_s)
    return probe(fleet, links, window, now)


def test_a_healthy_nvswitch_node_reads_every_counter_and_finds_nothing(fleet: SimFleet) -> None:
    links = Links(fleet)
    links.counters = {(0, 3, nv.NVML_NVLINK_ERROR_DL_CRC_FLIT): 5_000_000}  # a week of noise
    report = twice(fleet, links, {(0, 3, nv.NVML_NVLINK_ERROR_DL_CRC_FLIT): 5_000_050}, 30)
    assert report.healthy and "nvlink" in report.checks_run


@pytest.mark.parametrize(
    ("counter", "increase", "seconds", "reason", "severity"),
    [
        (nv.NVML_NVLINK_ERROR_DL_CRC_FLIT, 3000, 30, CRC_RATE, Severity.WARNING),  # 100/s
        (nv.NVML_NVLINK_ERROR_DL_CRC_DATA, 6000, 30, CRC_RATE, Severity.WARNING),  # 200/s
        (nv.NVML_NVLINK_ERROR_DL_REPLAY, 1, 30, REPLAYS, Severity.WARNING),
        (nv.NVML_NVLINK_ERROR_DL_RECOVERY, 1, 30, RECOVERIES, Severity.CRITICAL),
    ],
)
def test_a_counter_over_its_limit_is_a_finding_on_its_gpu(
    fleet: SimFleet, counter: int, increase: int, seconds: float, reason: str, severity: Severity
) -> None:
    report = twice(fleet, Links(fleet), {(1, 7, counter): increase}, seconds)
    assert found(report) == [(reason, 1, severity)]
    assert report.findings[0].evidence.startswith("link 7 ")


def test_crc_errors_under_dcgms_rate_are_a_healthy_links_noise(fleet: SimFleet) -> None:
    crc = nv.NVML_NVLINK_ERROR_DL_CRC_FLIT
    assert twice(fleet, Links(fleet), {(0, 2, crc): 2999}, 30).healthy  # 99.97/s


def test_a_counter_that_went_back_was_reset_not_negative(fleet: SimFleet) -> None:
    links = Links(fleet)
    replay = (0, 1, nv.NVML_NVLINK_ERROR_DL_REPLAY)
    links.counters = {replay: 40}
    assert twice(fleet, links, {replay: 0}, 30).healthy  # a GPU reset zeroed it


def test_the_windows_worked_example_holds() -> None:
    assert doctest.testmod(rates).failed == 0


def test_an_empty_window_samples_twice_instead_of_passing_a_fault() -> None:
    """A fresh agent (no earlier sample) still sees a link failing now: the simulated CRC
    fault is found on the very first probe, over the window's first gap."""
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.inject(NODE, "nvlink_crc", gpu=1)
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), host.probe_config)
    assert found(report) == [(CRC_RATE, 1, Severity.WARNING)]
    assert report.findings[0].evidence.startswith("link 5 CRC flit +")


def test_an_unreadable_counter_on_an_active_link_fails_closed(fleet: SimFleet) -> None:
    links = Links(fleet)
    links.unreadable = {(0, 4, nv.NVML_NVLINK_ERROR_DL_CRC_DATA)}
    report = probe(fleet, links, CounterWindow(first_gap_s=0.0), Clock())
    assert found(report) == [(UNREADABLE, 0, Severity.CRITICAL)]
    assert "link 4 CRC data" in report.findings[0].evidence


def test_a_link_inactive_among_active_peers_is_down_and_its_counters_are_not_asked(
    fleet: SimFleet,
) -> None:
    links = Links(fleet)
    links.inactive = {(1, 9)}
    links.unreadable = {(1, 9, c) for c in range(4)}  # a down link's counters: not a second fault
    report = probe(fleet, links, CounterWindow(first_gap_s=0.0), Clock())
    assert found(report) == [(NVLINK_DOWN, 1, Severity.CRITICAL)]
    assert report.findings[0].evidence == "NVLink links down: 9"


def test_a_node_whose_links_are_all_inactive_uses_no_nvlink(fleet: SimFleet) -> None:
    links = Links(fleet)
    links.inactive = {(g, link) for g in range(2) for link in range(18)}
    assert probe(fleet, links, CounterWindow(first_gap_s=0.0), Clock()).healthy


class NoNvLink(Links):
    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)  # a PCIe GPU without bridges


def test_a_gpu_without_nvlink_has_no_counters_to_read(fleet: SimFleet) -> None:
    links = NoNvLink(fleet)
    links.unreadable = {(0, 0, 0)}
    assert probe(fleet, links, CounterWindow(first_gap_s=0.0), Clock()).healthy


# -- the fabric: nvmlDeviceGetGpuFabricInfoV's state, status and health mask ------------------
DEGRADED = HEALTHY_FABRIC & ~0x3 | nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE
ROUTE_UNHEALTHY = HEALTHY_FABRIC & ~(0x3 << 4) | 1 << 4
INSUFFICIENT_NVLINKS = HEALTHY_FABRIC & ~(0xF << 8) | 5 << 8


@pytest.mark.parametrize(
    ("info", "reason", "says"),
    [
        (nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, 0, HEALTHY_FABRIC), None, ""),
        (nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, 0, None), None, ""),  # v1 only
        (nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED), None, ""),
        (
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_NOT_STARTED),
            FABRIC_NOT_READY,
            "GPU fabric registration not started, not completed",
        ),
        (  # Fabric Manager down: "fabric.state stays In Progress" (NVSentinel issue 889)
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_IN_PROGRESS),
            FABRIC_NOT_READY,
            "GPU fabric registration in progress, not completed",
        ),
        (
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, nv.NVML_ERROR_TIMEOUT),
            FABRIC_NOT_READY,
            "GPU fabric registration completed with NVML error 10",
        ),
        (
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, 0, DEGRADED),
            FABRIC_DEGRADED,
            "fabric health mask 0x1a1: NVLink bandwidth degraded",
        ),
        (
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, 0, ROUTE_UNHEALTHY),
            FABRIC_UNHEALTHY,
            "fabric health mask 0x192: route unhealthy",
        ),
        (
            nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, 0, INSUFFICIENT_NVLINKS),
            FABRIC_UNHEALTHY,
            "fabric health mask 0x5a2: insufficient NVLinks",
        ),
    ],
)
def test_the_fabric_state_and_health(
    fleet: SimFleet, info: nv.GpuFabricInfo, reason: str | None, says: str
) -> None:
    links = Links(fleet)
    links.fabric = info
    report = probe(fleet, links, CounterWindow(first_gap_s=0.0), Clock())
    fabric = [(f.reason, f.evidence) for f in report.findings if f.component.index == 0]
    assert fabric == ([(reason, says)] if reason else [])


def test_a_gpu_with_no_nvswitch_fabric_is_not_a_finding() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.node(NODE).nvswitch = False  # nvmlDeviceGetGpuFabricInfoV: not supported
    host = fleet.host(NODE)
    assert probe_node(NODE, host.nvml(), host.probe_config).healthy


def test_the_simulated_degraded_fabric_is_found() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.inject(NODE, "fabric_degraded", gpu=0)
    host = fleet.host(NODE)
    report = probe_node(NODE, host.nvml(), host.probe_config)
    assert found(report) == [(FABRIC_DEGRADED, 0, Severity.WARNING)]
