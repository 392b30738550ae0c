"""Run the checks, each with its own timeout. Fail closed: a check that hangs, raises or cannot
run becomes an unhealthy finding, and a probe that ran nothing is never healthy. When NVML
itself is broken, the kernel log is read for Xid lines instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from remedy.core.models import Finding, ProbeReport, Severity
from remedy.core.threads import call_with_timeout, spawn
from remedy.detection import gpu as nv
from remedy.detection.check_terms import CheckTerms
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.checks import GPU_CHECKS, INVENTORY, check_inventory
from remedy.detection.probe.context import CheckContext
from remedy.detection.probe.dcgm_health import DCGM_HEALTH, check_dcgm_health
from remedy.detection.probe.dcgm_sources import ExporterReadings, HealthSource, MetricsSource
from remedy.detection.probe.exporter_xids import DCGM_EXPORTER, check_dcgm_exporter
from remedy.detection.probe.fabric_manager import FABRIC_MANAGER, check_fabric_manager
from remedy.detection.probe.nic_check import NIC, check_nics
from remedy.detection.probe.nic_counters import CounterHistory
from remedy.detection.probe.nic_link import NIC_LINK, check_nic_link
from remedy.detection.probe.nic_log import nic_log_findings
from remedy.detection.probe.nics import NicSource
from remedy.detection.probe.rates import CounterWindow
from remedy.detection.probe.services import ServiceSource
from remedy.detection.probe.sxids import sxid_findings
from remedy.detection.probe.xid_dedup import XidDedup
from remedy.detection.probe.xids import xid_findings
from remedy.xid.kernel_log import KernelLogSource, parse_kernel_log
from remedy.xid.nvswitch import parse_sxids

T = TypeVar("T")
# Longer than a source's own limit (journalctl's 10 s): a read the probe gave up on would
# still move the cursor past lines nobody saw.
KERNEL_LOG_READ_TIMEOUT_S = 15.0

PROBE = CheckTerms(
    "probe", "the probe itself (fail closed: a check that could not run is a finding)", probe=True
)
NVML_UNAVAILABLE = PROBE.reason("NvmlUnavailable", "NVML cannot be loaded or initialised")
TIMED_OUT = PROBE.reason("CheckTimedOut", "a check did not answer in time")
CHECK_FAILED = PROBE.reason("CheckFailed", "a check raised an error")
# Made where the probe (or the deep diagnose) could not reach the node: its workflows.
UNAVAILABLE = PROBE.reason(
    "ProbeUnavailable", "the probe could not run on the node (its agent is down)"
)
KERNEL_LOG = CheckTerms(
    "kernel_log",
    "the kernel log read for Xids on every probe (kmsg, the journal or a file)",
    probe=True,
)
LOG_UNREADABLE = KERNEL_LOG.reason(
    "KernelLogUnreadable", "the kernel log cannot be read: Xids there go unseen"
)


@dataclass(frozen=True)
class ProbeConfig:
    expected_gpus: int | None = None  # 0: not a GPU node; None: do not check the count
    check_timeout_s: float = 5.0
    max_temperature_c: int = 87
    nics: NicSource | None = None
    expected_nics: int | None = None
    expected_nic_rate_gbps: float | None = None
    # The NICs' counter readings over the last hour: rates need more than one probe (one per
    # agent, kept across its probes; None: this probe's reading only, no rates).
    nic_history: CounterHistory | None = None
    kernel_log: KernelLogSource | None = None  # read for Xids on every probe
    not_before: datetime | None = None  # boot time: older Xids belong to an earlier boot
    xids_seen: XidDedup | None = None  # shared with NVML's Xid events: one Xid counts once
    # NVLink error counters' samples, kept across probes for their rates (None: not read).
    nvlink_window: CounterWindow | None = None
    fabric_manager: ServiceSource | None = None  # checked on NVSwitch systems
    dcgm_health: HealthSource | None = None  # DCGM's health watches (None: not read)
    # dcgm-exporter's metrics and the Xid gauge's last reading, kept across probes (None: not
    # read; the kernel log is the Xids' authority).
    dcgm_exporter: MetricsSource | None = None
    exporter_readings: ExporterReadings | None = None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _Run:
    """One probe run: collects findings and the names of the checks that completed."""

    def __init__(self, ctx: CheckContext, timeout_s: float) -> None:
        self.ctx, self.timeout_s = ctx, timeout_s
        self.findings: list[Finding] = []
        self.checks_run: list[str] = []

    def check(self, name: str, fn: Callable[[CheckContext], list[Finding]]) -> bool:
        try:
            self.findings.extend(call_with_timeout(lambda: fn(self.ctx), self.timeout_s))
        except TimeoutError:
            self.fail(TIMED_OUT, f"check {name} did not answer within {self.timeout_s:g}s")
            return False
        except Exception as exc:  # noqa: BLE001 - any failure of a check is a finding
            self.fail(CHECK_FAILED, f"check {name} failed: {type(exc).__name__}: {exc}")
            return False
        self.checks_run.append(name)
        return True

    def parallel(self, checks: dict[str, Callable[[CheckContext], list[Finding]]]) -> None:
        running = [
            spawn(partial(self.check, name, fn), f"probe-{name}") for name, fn in checks.items()
        ]
        for done in running:  # each check enforces its own timeout
            done.wait()

    def fail(self, reason: str, evidence: str) -> None:
        self.findings.append(self.ctx.finding(PROBE.check, reason, Severity.CRITICAL, evidence))


def probe_node(
    node: str,
    nvml: NvmlApi,
    config: ProbeConfig = ProbeConfig(),
    now: Callable[[], datetime] = _utcnow,
) -> ProbeReport:
    started, t0 = now(), time.perf_counter()
    ctx = CheckContext(
        node=node,
        nvml=nvml,
        now=now,
        expected_gpus=config.expected_gpus,
        max_temperature_c=config.max_temperature_c,
        nics=config.nics,
        expected_nics=config.expected_nics,
        expected_nic_rate_gbps=config.expected_nic_rate_gbps,
        nvlink_window=config.nvlink_window,
        fabric_manager=config.fabric_manager,
        nic_history=config.nic_history,
        dcgm_health=config.dcgm_health,
        dcgm_exporter=config.dcgm_exporter,
        exporter_readings=config.exporter_readings or ExporterReadings(),
    )
    run = _Run(ctx, config.check_timeout_s)
    if config.expected_gpus != 0:
        _probe_gpus(run, nvml, config)
    if config.nics is not None:
        run.check(NIC.check, check_nics)
        run.check(NIC_LINK.check, check_nic_link)
    order = [
        INVENTORY.check,
        *GPU_CHECKS,
        FABRIC_MANAGER.check,
        DCGM_HEALTH.check,
        DCGM_EXPORTER.check,
        KERNEL_LOG.check,
        NIC.check,
        NIC_LINK.check,
    ]
    return ProbeReport(
        node=node,
        checks_run=sorted(run.checks_run, key=order.index),
        findings=run.findings,
        gpus=sorted(ctx.gpus, key=lambda g: g.index or 0),
        started_at=started,
        duration_s=time.perf_counter() - t0,
    )


def _probe_gpus(run: _Run, nvml: NvmlApi, config: ProbeConfig) -> None:
    try:
        call_with_timeout(nvml.nvmlInit, config.check_timeout_s)
    except (nv.NVMLError, OSError, TimeoutError) as exc:
        run.fail(NVML_UNAVAILABLE, f"NVML cannot be used: {type(exc).__name__}: {exc}")
    else:
        try:
            if run.check(INVENTORY.check, check_inventory):
                run.parallel({**GPU_CHECKS, **_optional_checks(config)})
        finally:
            try:
                nvml.nvmlShutdown()
            except nv.NVMLError:
                pass
    if config.kernel_log is not None:  # after the inventory: its GPUs name the log's PCI ids
        _read_kernel_log(run, config.kernel_log, config)


def _optional_checks(config: ProbeConfig) -> dict[str, Callable[[CheckContext], list[Finding]]]:
    """The checks the node was asked to run beside the GPU checks (after the inventory: they
    name GPUs by its index and UUID)."""
    checks: dict[str, Callable[[CheckContext], list[Finding]]] = {}
    if config.fabric_manager:
        checks[FABRIC_MANAGER.check] = check_fabric_manager
    if config.dcgm_health:
        checks[DCGM_HEALTH.check] = check_dcgm_health
    if config.dcgm_exporter:
        checks[DCGM_EXPORTER.check] = lambda ctx: _exporter_xids(ctx, config)
    return checks


def _exporter_xids(ctx: CheckContext, config: ProbeConfig) -> list[Finding]:
    found = check_dcgm_exporter(ctx)
    # The kernel log (or NVML) and the gauge may both see one Xid: it counts once.
    return config.xids_seen.admit(found, "dcgm_exporter", ctx.now()) if config.xids_seen else found


def _read_kernel_log(run: _Run, source: KernelLogSource, config: ProbeConfig) -> None:
    try:
        lines = call_with_timeout(source.read_new, max(run.timeout_s, KERNEL_LOG_READ_TIMEOUT_S))
    except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
        run.findings.append(
            run.ctx.finding(
                KERNEL_LOG.check,
                LOG_UNREADABLE,
                Severity.CRITICAL,
                f"cannot read the kernel log ({source}) for Xids: {type(exc).__name__}: {exc}",
            )
        )
        return
    run.check(KERNEL_LOG.check, lambda ctx: _kernel_log_xids(ctx, lines, config))


def _kernel_log_xids(ctx: CheckContext, lines: list[str], config: ProbeConfig) -> list[Finding]:
    now = ctx.now()
    # Each GPU's own generation (the inventory's): what an Xid means can differ by it.
    architectures = {
        g.pci_bus_id: g.architecture
        for g in ctx.gpus
        if g.pci_bus_id and g.architecture is not None
    }
    events = parse_kernel_log(lines, architecture=architectures)
    found = xid_findings(ctx.node, events, not_before=config.not_before, now=now, gpus=ctx.gpus)
    found = config.xids_seen.admit(found, "kernel_log", now) if config.xids_seen else found
    sxids = sxid_findings(ctx.node, parse_sxids(lines), config.not_before, now)
    return found + sxids + nic_log_findings(ctx.node, lines, config.not_before, now)
