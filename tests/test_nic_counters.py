"""The NIC link check on real sysfs layouts: InfiniBand PMA counters and EFA hw_counters read
by the host adapter, counted over the last hour, reset and saturation, unreadable counters
failing closed, and each port compared with its peers.

Formats (cited where each sample is built):
- ``state`` "4: ACTIVE", ``phys_state`` "5: LinkUp", ``rate`` "%d%s Gb/sec (%dX%s)", the PMA
  counters one decimal per file, "N/A (no PMA)" where an older kernel's PMA query failed:
  linux drivers/infiniband/core/sysfs.c (``rate_show``, ``show_pma_counter``) and
  Documentation/ABI/stable/sysfs-class-infiniband; prometheus/procfs sysfs/class_infiniband.go
  skips that "N/A (no PMA)" text.
- EFA: no ``counters/`` (no PMA), port stats in ``hw_counters/`` (tx_bytes … rx_drops,
  rdma_read_wr_err, and on Nitro v4+ retrans_timeout_events): linux
  drivers/infiniband/hw/efa/efa_verbs.c (``EFA_DEFINE_PORT_STATS``) and efa_com_cmd.h
  (``efa_com_network_stats``); its rate "100 Gb/sec (4X EDR)" from
  ``efa_link_gbps_to_speed_and_width``.
- thresholds: NVSentinel's NIC monitor design (046-link-counter-detection: IBTA symbol_error
  > 120/h, link_downed and link integrity fatal on any rise, reset = the new value).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.host.nics import SysfsNics
from adapters.host.provider import HostSettings
from remedy.core.models import Finding, Severity
from remedy.detection.probe.context import CheckContext
from remedy.detection.probe.nic_check import check_nics
from remedy.detection.probe.nic_counters import IB_COUNTERS, CounterHistory
from remedy.detection.probe.nic_link import check_nic_link, thresholds_markdown
from remedy.runbook import RunbookSet
from remedy.runbook.schema import FROM_CONDITION

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
NDR = "400 Gb/sec (4X NDR)"  # ConnectX-7 at NDR, as rate_show prints it


class Node:
    """A /sys/class/infiniband tree in a temporary folder, and the probe's view of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.history = CounterHistory()
        self.at = T0

    def ib_port(
        self,
        device: str,
        rate: str = NDR,
        state: str = "4: ACTIVE",
        hca: str = "MT4129",
        link_layer: str = "InfiniBand",
    ) -> Path:
        port = self.root / device / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        (self.root / device / "hca_type").write_text(hca + "\n")
        for name, text in (
            ("state", state),
            ("phys_state", "5: LinkUp" if "ACTIVE" in state else "2: Polling"),
            ("rate", rate),
            ("link_layer", link_layer),
        ):
            (port / name).write_text(text + "\n")
        for counter in IB_COUNTERS:
            (port / "counters" / counter).write_text("0\n")
        return port

    def efa_port(self, device: str, network_stats: bool = True) -> Path:
        port = self.root / device / "ports" / "1"
        (port / "hw_counters").mkdir(parents=True)
        (port / "state").write_text("4: ACTIVE\n")
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "rate").write_text("100 Gb/sec (4X EDR)\n")
        (port / "link_layer").write_text("Unspecified\n")  # EFA: neither IB nor Ethernet
        stats = ["tx_bytes", "rx_bytes", "rx_drops", "rdma_read_wr_err", "lifespan"]
        if network_stats:
            stats += ["retrans_pkts", "retrans_timeout_events", "impaired_remote_conn_events"]
        for name in stats:
            (port / "hw_counters" / name).write_text("0\n")
        return port

    def set(self, device: str, counter: str, value: str) -> None:
        port = self.root / device / "ports" / "1"
        folder = "counters" if (port / "counters").is_dir() else "hw_counters"
        (port / folder / counter).write_text(value + "\n")

    def probe(self, after: timedelta = timedelta(0), rate: float | None = None) -> list[Finding]:
        self.at += after
        ctx = CheckContext(
            node="n1",
            nvml=None,  # type: ignore[arg-type]  # the NIC checks never call NVML
            now=lambda: self.at,
            nics=SysfsNics(self.root),
            expected_nic_rate_gbps=rate,
            nic_history=self.history,
        )
        return check_nics(ctx) + check_nic_link(ctx)


def said(findings: list[Finding]) -> list[tuple[str, str | None, Severity]]:
    return sorted((f.reason, f.component.device, f.severity) for f in findings)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_a_healthy_fabric_is_quiet_over_readings(node: Node) -> None:
    for i in range(8):
        node.ib_port(f"mlx5_{i}")
    assert node.probe() == []
    node.set("mlx5_3", "symbol_error", "40")  # under the IBTA rate: PAM4 links err a little
    assert node.probe(timedelta(minutes=5)) == []


def test_symbol_errors_above_120_an_hour(node: Node) -> None:
    node.ib_port("mlx5_0")
    node.probe()
    node.set("mlx5_0", "symbol_error", "121")
    assert said(node.probe(timedelta(minutes=30))) == [
        ("NicSymbolErrors", "mlx5_0/1", Severity.WARNING)
    ]


def test_one_flap_is_watched_three_in_the_hour_escalate_and_a_quiet_hour_ages_out(
    node: Node,
) -> None:
    node.ib_port("mlx5_0")
    node.probe()
    node.set("mlx5_0", "link_downed", "1")
    assert said(node.probe(timedelta(minutes=10))) == [
        ("NicLinkFlap", "mlx5_0/1", Severity.WARNING)
    ]
    node.set("mlx5_0", "link_downed", "3")
    assert said(node.probe(timedelta(minutes=10))) == [
        ("NicLinkFlapping", "mlx5_0/1", Severity.CRITICAL)
    ]
    for _ in range(7):  # ten quiet minutes at a time: the downs leave the window
        found = node.probe(timedelta(minutes=10))
    assert found == []


def test_a_counter_reset_counts_the_new_value_not_a_negative_rise(node: Node) -> None:
    node.ib_port("mlx5_0")
    node.set("mlx5_0", "symbol_error", "1000")
    node.set("mlx5_0", "link_downed", "5")
    node.probe()
    node.set("mlx5_0", "symbol_error", "50")  # driver reload / perfquery -R: back near zero
    node.set("mlx5_0", "link_downed", "1")  # one down since the reset
    assert said(node.probe(timedelta(minutes=5))) == [("NicLinkFlap", "mlx5_0/1", Severity.WARNING)]


def test_link_integrity_and_overrun_are_critical_on_any_rise(node: Node) -> None:
    node.ib_port("mlx5_0")
    node.ib_port("mlx5_1")
    node.probe()
    node.set("mlx5_0", "local_link_integrity_errors", "1")
    node.set("mlx5_1", "excessive_buffer_overrun_errors", "2")
    assert said(node.probe(timedelta(minutes=1))) == [
        ("NicLinkIntegrity", "mlx5_0/1", Severity.CRITICAL),
        ("NicLinkIntegrity", "mlx5_1/1", Severity.CRITICAL),
    ]
    node.set("mlx5_0", "excessive_buffer_overrun_errors", "1")  # both on one port: one finding
    [finding] = [f for f in node.probe(timedelta(minutes=1)) if f.component.device == "mlx5_0/1"]
    assert finding.evidence == (
        "local_link_integrity_errors rose by 1: any rise; "
        "excessive_buffer_overrun_errors rose by 1: any rise"
    )


def test_rates_over_a_short_span_are_scaled_from_readings_further_apart(node: Node) -> None:
    """port_rcv_errors: more than 10 a second (600 a minute). 3000 over five minutes is 600 a
    minute: not above; 3100 is."""
    node.ib_port("mlx5_0")
    node.probe()
    node.set("mlx5_0", "port_rcv_errors", "3000")
    assert node.probe(timedelta(minutes=5)) == []
    node.set("mlx5_0", "port_rcv_errors", "6100")
    assert said(node.probe(timedelta(minutes=5))) == [
        ("NicLinkErrors", "mlx5_0/1", Severity.WARNING)
    ]


def test_readings_further_apart_than_the_hour_average_a_rate_but_count_every_down(
    node: Node,
) -> None:
    """The agent was away two hours: 240 symbol errors over them are 120 an hour (not above
    the IBTA rate); a down in them still happened, and is counted."""
    node.ib_port("mlx5_0")
    node.probe()
    node.set("mlx5_0", "symbol_error", "240")
    assert node.probe(timedelta(hours=2)) == []
    node.set("mlx5_0", "symbol_error", "600")
    node.set("mlx5_0", "link_downed", "1")
    assert said(node.probe(timedelta(hours=2))) == [
        ("NicLinkFlap", "mlx5_0/1", Severity.WARNING),
        ("NicSymbolErrors", "mlx5_0/1", Severity.WARNING),  # 360 in 2 h: 180 an hour
    ]


def test_a_saturated_counter_fails_closed(node: Node) -> None:
    """symbol_error is 16 bits in the PMA and stops at 65535: it can no longer rise."""
    node.ib_port("mlx5_0")
    node.set("mlx5_0", "symbol_error", "65535")
    [finding] = node.probe()
    assert (finding.check, finding.reason) == ("nic", "NicCountersUnreadable")
    assert "symbol_error: at its maximum 65535" in finding.evidence


@pytest.mark.parametrize(
    ("breaks", "says"),
    [
        (lambda c: c.write_text("N/A (no PMA)\n"), "reads 'N/A (no PMA)'"),
        (lambda c: c.unlink(), "No such file"),
        (lambda c: (c.unlink(), c.mkdir()), "Is a directory"),
    ],
)
def test_an_unreadable_counter_is_a_finding_never_a_zero(node: Node, breaks, says) -> None:  # type: ignore[no-untyped-def]
    port = node.ib_port("mlx5_0")
    breaks(port / "counters" / "link_downed")
    [finding] = node.probe()
    assert (finding.reason, finding.severity) == ("NicCountersUnreadable", Severity.CRITICAL)
    assert finding.evidence.startswith("link_downed: ") and says in finding.evidence


def test_a_port_with_no_counters_folder_fails_closed(node: Node) -> None:
    port = node.ib_port("mlx5_0")
    for counter in (port / "counters").iterdir():
        counter.unlink()
    (port / "counters").rmdir()
    [finding] = node.probe()
    assert finding.reason == "NicCountersUnreadable" and "no counters/" in finding.evidence


def test_excluded_devices_are_neither_read_nor_counted(node: Node) -> None:
    """A DGX's firmware-restricted PF fails every counter read (ACCESS_REG, gpud issue 1164):
    the operator leaves it out (``--nic-exclude``) rather than have it fail closed forever."""
    for i in range(3):
        node.ib_port(f"mlx5_{i}")
    node.set("mlx5_2", "symbol_error", "N/A (no PMA)")
    assert [f.component.device for f in node.probe()] == ["mlx5_2/1"]
    nics = SysfsNics(node.root, exclude=frozenset({"mlx5_2"}))
    assert [p.device for p in nics.ports()] == ["mlx5_0", "mlx5_1"]
    assert [c.device for c in nics.counters()] == ["mlx5_0", "mlx5_1"]


def test_the_exclusion_flag_is_checked_once() -> None:
    assert HostSettings(node="n", nic_exclude=" mlx5_0, mlx5_1,").excluded_nics == {
        "mlx5_0",
        "mlx5_1",
    }
    with pytest.raises(ValueError, match="'mlx5 0' is not an RDMA device name"):
        HostSettings(node="n", nic_exclude="mlx5 0")


def test_efa_hw_counters(node: Node) -> None:
    node.efa_port("rdmap16s27")
    node.efa_port("rdmap32s27", network_stats=False)  # before Nitro v4: no network stats
    assert node.probe() == []
    node.set("rdmap16s27", "retrans_timeout_events", "61")
    assert said(node.probe(timedelta(minutes=20))) == [
        ("NicEfaErrors", "rdmap16s27/1", Severity.WARNING)
    ]
    (node.root / "rdmap32s27/ports/1/hw_counters/rx_drops").unlink()  # always there: required
    found = said(node.probe())
    assert ("NicCountersUnreadable", "rdmap32s27/1", Severity.CRITICAL) in found
    assert ("NicEfaErrors", "rdmap16s27/1", Severity.WARNING) in found  # still in the hour


def test_a_port_slower_or_narrower_than_its_peers_is_degraded(node: Node) -> None:
    for i in range(7):
        node.ib_port(f"mlx5_{i}")
    node.ib_port("mlx5_7", rate="200 Gb/sec (2X NDR)")  # lost two lanes
    # The storage NIC: another model on Ethernet, never compared with the compute fabric.
    node.ib_port("mlx5_8", rate="100 Gb/sec (4X EDR)", hca="MT4125", link_layer="Ethernet")
    found = node.probe()
    assert said(found) == [("NicBelowPeers", "mlx5_7/1", Severity.WARNING)]
    assert found[0].evidence == "200 Gb/s, its 7 peers 400 Gb/s"


def test_the_pool_expectation_is_said_once_not_twice(node: Node) -> None:
    for i in range(4):
        node.ib_port(f"mlx5_{i}", rate=NDR if i else "200 Gb/sec (2X NDR)")
    assert [f.reason for f in node.probe(rate=400.0)] == ["NicRateDegraded"]


def test_two_ports_that_differ_cannot_say_which_is_slow(node: Node) -> None:
    node.ib_port("mlx5_0")
    node.ib_port("mlx5_1", rate="200 Gb/sec (4X HDR)")
    assert node.probe() == []


def test_a_narrower_port_at_the_same_rate_is_below_its_peers(node: Node) -> None:
    for i in range(3):
        node.ib_port(f"mlx5_{i}", rate="200 Gb/sec (4X HDR)")
    node.ib_port("mlx5_3", rate="200 Gb/sec (2X NDR)")
    [finding] = node.probe()
    assert (finding.reason, finding.evidence) == ("NicBelowPeers", "2X wide, its 3 peers 4X")


def test_a_down_port_is_down_not_below_its_peers(node: Node) -> None:
    for i in range(3):
        node.ib_port(f"mlx5_{i}")
    node.ib_port("mlx5_3", rate="10 Gb/sec (4X SDR)", state="1: DOWN")
    assert [f.reason for f in node.probe()] == ["NicPortDown"]


@pytest.mark.parametrize(
    ("reason", "runbook"),
    [
        ("NicLinkFlap", "nic-link-flapping"),
        ("NicSymbolErrors", "nic-link-flapping"),
        ("NicLinkFlapping", "nic-link-failing"),
        ("NicLinkIntegrity", "nic-link-failing"),
        ("NicBelowPeers", "nic-degraded"),
        ("NicCountersUnreadable", "nic-degraded"),
        ("NicPortDown", "nic-degraded"),
        ("NicEfaErrors", "nic-link-flapping"),
        ("Mlx5CommandTimeout", "nic-driver"),
        ("EfaAdminTimeout", "nic-driver"),
    ],
)
def test_each_nic_finding_has_its_runbook(
    shipped_runbooks: RunbookSet, reason: str, runbook: str
) -> None:
    """From the probe, and as the fleet scan rebuilds it from the node's condition (which
    keeps only the reason: check "condition")."""
    from remedy.detection import vocabulary

    for check in (str(vocabulary.check_of(reason)), FROM_CONDITION):
        finding = Finding(
            node="n1", check=check, reason=reason, severity=Severity.WARNING, observed_at=T0
        )
        matched = shipped_runbooks.match(finding)
        assert matched is not None and matched.name == runbook, check


def test_a_flap_is_tolerated_longer_than_the_window_that_counts_it(
    shipped_runbooks: RunbookSet,
) -> None:
    """A single flap ages out of the probe's hour before the tolerance ends: a re-probe then
    sees a healthy port and no disruptive rung runs; a degraded NIC cordons at once."""
    flapping = shipped_runbooks.get("nic-link-flapping")
    assert not flapping.cordon and flapping.tolerance > CounterHistory().window
    assert flapping.recheck_every is not None
    assert shipped_runbooks.get("nic-degraded").cordon


def test_the_thresholds_table_names_each_counter_and_its_source() -> None:
    table = thresholds_markdown()
    assert "| `symbol_error` | more than 120 an hour | `NicSymbolErrors` | IBTA BER 1e-12" in table
    assert "| `retrans_timeout_events` |" in table and "remedy's choice" in table
