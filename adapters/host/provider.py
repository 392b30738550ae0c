"""The real node's entry: the settings of its own machine (what `remedy agent`, `probe` and
`doctor` read and may do there), checked once, and the ``LocalHost`` built from them for the
composition root (workers/providers), with which pod uses which GPU, from the kubelet."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from adapters.host.dcgm_health import DcgmiHealth, ExporterMetrics
from adapters.host.kernel_sources import kernel_log_source
from adapters.host.load_test import LoadTestConfig
from adapters.host.local import DEFAULT_REBOOT_COMMAND, DEFAULT_STATE_DIR, LocalHost, boot_time
from adapters.host.nics import SysfsNics
from adapters.host.pod_resources import KubeletPodResources, device_ids
from adapters.host.services import SystemdUnit
from remedy.detection.host import NodeHost
from remedy.detection.pod_resources import GpuUsePublisher, GpuUseReporter
from remedy.detection.probe import ProbeConfig
from remedy.detection.probe.dcgm_sources import ExporterReadings
from remedy.detection.probe.nic_counters import CounterHistory
from remedy.detection.probe.rates import CounterWindow
from remedy.detection.probe.throughput import REFERENCE_FILE, load_references
from remedy.detection.probe.xid_dedup import XidDedup


class HostSettings(BaseModel):
    """A node's own machine. The field names are the flags' (``--reboot-command``); a
    problem is a ValueError on the field. Resets and reboots stay refused unless allowed."""

    model_config = ConfigDict(frozen=True)

    node: str
    expected_gpus: int | None = None  # 0: not a GPU node; None: not counted
    expected_nics: int | None = None
    nic_rate: float | None = None  # Gb/s a port should run at
    nic_exclude: str = ""  # RDMA devices left out, comma-separated (mlx5_0,mlx5_1)
    timeout: float = Field(default=5.0, gt=0)  # seconds each check may take
    kernel_log: str = "auto"  # adapters/host/kernel_sources.py
    cursor: Path | None = None  # where the kernel log's cursor is kept
    allow_reset: bool = False
    allow_reboot: bool = False
    reboot_command: str = DEFAULT_REBOOT_COMMAND  # split like a shell would
    dry_run: bool = False  # resets and reboots say what they would do
    state_dir: Path = DEFAULT_STATE_DIR  # what the node did, by key: outlives a reboot
    dcgm_level: int = Field(default=2, ge=1, le=4)
    dcgm_host: str = ""
    fabric_manager: str = ""  # the systemd unit watched on NVSwitch systems; empty: not watched
    dcgm_health: bool = False  # read DCGM's health watches on every probe (dcgmi, dcgm_host)
    dcgm_exporter: str = ""  # dcgm-exporter's metrics URL: its Xid gauge; empty: not read
    diagnose_timeout: float = 600.0
    gpu_reference: Path = REFERENCE_FILE
    # The agent's: NVML's Xid events are watched beside the kernel log, one Xid counts once.
    watch_xids: bool = False

    @field_validator("kernel_log")
    @classmethod
    def _known_source(cls, spec: str) -> str:
        kernel_log_source(spec)  # ValueError names the spellings
        return spec

    @field_validator("reboot_command")
    @classmethod
    def _one_command(cls, text: str) -> str:
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        if not words:
            raise ValueError("empty")
        return text

    @field_validator("gpu_reference")
    @classmethod
    def _readable_reference(cls, path: Path) -> Path:
        try:
            load_references(path)
        except (OSError, ValueError) as exc:  # a ValidationError's own fields are the file's
            raise ValueError(str(exc)) from None
        return path

    @field_validator("nic_exclude")
    @classmethod
    def _device_names(cls, text: str) -> str:
        bad = [d for d in text.split(",") if d.strip() and not re.fullmatch(r"[\w.-]+", d.strip())]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an RDMA device name (e.g. mlx5_0)")
        return text

    @field_validator("dcgm_exporter")
    @classmethod
    def _metrics_url(cls, url: str) -> str:
        if url and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
            raise ValueError(f"{url!r} is not an http(s) URL (e.g. http://localhost:9400/metrics)")
        return url

    @property
    def excluded_nics(self) -> frozenset[str]:
        return frozenset(d.strip() for d in self.nic_exclude.split(",") if d.strip())

    def probe_config(self) -> ProbeConfig:
        within = self.timeout * 0.8  # a slow dcgmi or exporter: its own finding, not a timeout
        return ProbeConfig(
            expected_gpus=self.expected_gpus,
            check_timeout_s=self.timeout,
            nics=SysfsNics(exclude=self.excluded_nics) if self.expected_nics else None,
            expected_nics=self.expected_nics,
            expected_nic_rate_gbps=self.nic_rate,
            nic_history=CounterHistory() if self.expected_nics else None,
            kernel_log=kernel_log_source(self.kernel_log, self.cursor),
            not_before=boot_time(),
            xids_seen=XidDedup() if self.watch_xids else None,
            nvlink_window=CounterWindow(),
            fabric_manager=SystemdUnit(self.fabric_manager) if self.fabric_manager else None,
            dcgm_health=DcgmiHealth(host=self.dcgm_host, timeout_s=within)
            if self.dcgm_health
            else None,
            dcgm_exporter=ExporterMetrics(self.dcgm_exporter, timeout_s=within)
            if self.dcgm_exporter
            else None,
            exporter_readings=ExporterReadings(),
        )


def local_host(settings: HostSettings) -> LocalHost:
    """This machine, as the settings allow."""
    return LocalHost(
        settings.node,
        settings.probe_config(),
        allow_reset=settings.allow_reset,
        allow_reboot=settings.allow_reboot,
        reboot_command=tuple(shlex.split(settings.reboot_command)),
        state_dir=settings.state_dir,
        dry_run=settings.dry_run,
        load_test=LoadTestConfig(
            dcgm_level=settings.dcgm_level,
            dcgm_host=settings.dcgm_host,
            dcgm_timeout_s=settings.diagnose_timeout,
            references=settings.gpu_reference,
        ),
    )


def gpu_use(
    node: str, socket: str, host: NodeHost, marks: GpuUsePublisher
) -> GpuUseReporter | None:
    """Which pod uses which GPU, read from the kubelet's socket and published on the node
    through ``marks`` (None: no socket, not read)."""
    if not socket:
        return None
    source = KubeletPodResources(socket)
    return GpuUseReporter(node, source, lambda: device_ids(host.nvml()), marks)
