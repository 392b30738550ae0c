"""dcgm-exporter's Xid gauge in the probe (--dcgm-exporter): the GPUs whose last Xid changed
since the last probe are Xid findings on that GPU, by UUID; the gauge cannot show a repeat or
a time; an exporter that cannot be read is a finding, never healthy.

The exporter's format: tests/data/dcgm_exporter/h100_xid79.prom (see tests/test_dcgm_exporter.py
for its source); the simulated exporter prints the same lines (adapters/sim/node.py)."""

from __future__ import annotations

import threading
import urllib.error
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from adapters.host.dcgm_health import ExporterMetrics
from adapters.host.provider import HostSettings
from adapters.sim import SimFleet
from remedy.core.models import ProbeReport
from remedy.detection.dcgm_exporter import MAX_BYTES
from remedy.detection.probe import ProbeConfig, probe_node
from remedy.detection.probe.dcgm_sources import ExporterReadings
from remedy.detection.probe.exporter_xids import DCGM_EXPORTER, EXPORTER_UNREADABLE
from remedy.detection.probe.xid_dedup import XidDedup

NODE = "gpu-node-000"
PROM = (Path(__file__).parent / "data" / "dcgm_exporter" / "h100_xid79.prom").read_bytes()


def sim_probe(fleet: SimFleet, **changes: object) -> ProbeReport:
    host = fleet.host(NODE)
    return probe_node(NODE, host.nvml(), replace(host.probe_config, **changes))  # type: ignore[arg-type]


def xids(report: ProbeReport) -> list[tuple[str, int | None, str | None]]:
    return [(f.reason, f.component.index, f.component.uuid) for f in report.findings if f.xid]


def test_a_new_xid_on_the_gauge_is_an_xid_finding_on_that_gpu_once() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.nodes[NODE].dcgm_exporter = True
    assert sim_probe(fleet).healthy  # every gauge 0: no Xid
    fleet.inject(NODE, "nvlink_down", gpu=1)
    gpu1 = fleet.nodes[NODE].gpus[1].uuid
    first = sim_probe(fleet)
    assert DCGM_EXPORTER.check in first.checks_run
    assert ("Xid74", 1, gpu1) in xids(first)
    finding = next(f for f in first.findings if f.xid == 74)
    assert "gauge" in finding.evidence and "a repeat is not seen" in finding.evidence
    assert finding.nvidia_action  # the catalog's action routes it to a runbook
    # The gauge still says 74: the same code again is invisible, not a second Xid.
    assert xids(sim_probe(fleet)) == []


def test_a_restarted_agent_takes_the_gauge_as_its_baseline() -> None:
    """Before, every agent start reported each GPU's last Xid again, however old: an agent
    rollout would have started a ladder on every node whose gauge was not 0."""
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.nodes[NODE].dcgm_exporter = True
    sim_probe(fleet)  # the baseline: every gauge 0
    fleet.inject(NODE, "ecc_dbe", gpu=0)
    assert ("Xid48", 0) in [x[:2] for x in xids(sim_probe(fleet))]
    fleet.nodes[NODE].agent_starts()
    assert xids(sim_probe(fleet)) == []  # the gauge still says 48: history, not news


def test_the_kernel_log_and_the_gauge_count_one_xid_once() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    fleet.nodes[NODE].dcgm_exporter = True
    seen, mine, theirs = XidDedup(), ExporterReadings(), ExporterReadings()
    sim_probe(fleet, exporter_readings=mine)  # the baselines, before the fault
    sim_probe(fleet, exporter_readings=theirs)
    fleet.inject(NODE, "nvlink_down", gpu=1)
    gpu = next(g for g in sim_probe(fleet).gpus if g.index == 1)
    first = sim_probe(fleet, exporter_readings=mine)
    kernel = next(f for f in first.findings if f.xid == 74).model_copy(update={"component": gpu})
    assert seen.admit([kernel], "kernel_log", datetime.now(UTC)) == [kernel]
    report = sim_probe(fleet, xids_seen=seen, exporter_readings=theirs)
    assert not [f for f in report.findings if f.xid == 74]


class Exposition(BaseHTTPRequestHandler):
    body = PROM

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        """Quiet: http.server would print every request to stderr."""


@pytest.fixture
def exporter() -> Iterator[HTTPServer]:
    server = HTTPServer(("127.0.0.1", 0), Exposition)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_exporter_over_http(exporter: HTTPServer) -> None:
    url = f"http://127.0.0.1:{exporter.server_port}/metrics"
    assert ExporterMetrics(url).fetch().encode() == PROM
    fleet = SimFleet(nodes=1, gpus_per_node=2)
    readings = ExporterReadings()
    Exposition.body = PROM.replace(b"} 79", b"} 0")  # before the Xid: the baseline
    try:
        assert (
            xids(sim_probe(fleet, dcgm_exporter=ExporterMetrics(url), exporter_readings=readings))
            == []
        )
    finally:
        Exposition.body = PROM
    report = sim_probe(fleet, dcgm_exporter=ExporterMetrics(url), exporter_readings=readings)
    # The sample's GPU 0 (its UUID is not the sim's): named by the exporter's UUID.
    assert xids(report) == [("Xid79", None, "GPU-34319582-d595-d1c7-d1d2-179bcfa61660")]


def refuse(url: str, timeout_s: float, limit: int) -> bytes:
    raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))


def too_much(url: str, timeout_s: float, limit: int) -> bytes:
    assert limit == MAX_BYTES + 1  # read no more than that
    return b"#" * limit


def no_gauge(url: str, timeout_s: float, limit: int) -> bytes:
    return b"# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n" + PROM.splitlines()[6] + b"\n"


def not_metrics(url: str, timeout_s: float, limit: int) -> bytes:
    return b'DCGM_FI_DEV_XID_ERRORS{gpu="0"} seventy-nine\n'


@pytest.mark.parametrize(
    ("fetch", "said"),
    [
        (refuse, "Connection refused"),
        (too_much, f"more than {MAX_BYTES} bytes"),
        (no_gauge, "publishes no DCGM_FI_DEV_XID_ERRORS"),
        (not_metrics, "line 1"),
    ],
)
def test_an_exporter_that_cannot_be_read_is_a_finding(fetch: object, said: str) -> None:
    source = ExporterMetrics("http://127.0.0.1:9400/metrics", fetch=fetch)  # type: ignore[arg-type]
    report = sim_probe(SimFleet(nodes=1, gpus_per_node=2), dcgm_exporter=source)
    found = [f for f in report.findings if f.check == DCGM_EXPORTER.check]
    assert [f.reason for f in found] == [EXPORTER_UNREADABLE] and said in found[0].evidence
    assert not report.healthy


def test_the_flag_takes_an_http_url() -> None:
    settings = HostSettings(node="n", dcgm_exporter="http://10.0.0.7:9400/metrics")
    config: ProbeConfig = settings.probe_config()
    assert isinstance(config.dcgm_exporter, ExporterMetrics)
    assert HostSettings(node="n").probe_config().dcgm_exporter is None  # default: not read
    with pytest.raises(ValidationError, match="not an http"):
        HostSettings(node="n", dcgm_exporter="10.0.0.7:9400")
