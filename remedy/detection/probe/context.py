"""What every probe check is given (the node, its NVML, what it should have) and the helpers
the checks share: the GPUs NVML can still reach, and a query a GPU may not support.

A query a GPU does not support (NVMLError_NotSupported) is skipped, not a fault: older GPUs lack
row remapping, most nodes lack NVSwitch fabric. Any other NVML error fails the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection import gpu as nv
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.dcgm_sources import ExporterReadings, HealthSource, MetricsSource
from remedy.detection.probe.nic_counters import CounterHistory
from remedy.detection.probe.nics import NicSource
from remedy.detection.probe.rates import CounterWindow
from remedy.detection.probe.services import ServiceSource

NODE = Component(kind=ComponentKind.NODE)


@dataclass
class CheckContext:
    node: str
    nvml: NvmlApi
    now: Callable[[], datetime]
    expected_gpus: int | None = None
    max_temperature_c: int = 87
    nics: NicSource | None = None
    expected_nics: int | None = None
    expected_nic_rate_gbps: float | None = None
    nvlink_window: CounterWindow | None = None  # None: NVLink error counters are not read
    fabric_manager: ServiceSource | None = None
    nic_history: CounterHistory | None = None  # the counters' readings, kept across probes
    dcgm_health: HealthSource | None = None  # None: DCGM's health watches are not read
    dcgm_exporter: MetricsSource | None = None  # None: dcgm-exporter's Xid gauge is not read
    exporter_readings: ExporterReadings | None = None  # the gauge's last reading, across probes
    gpus: list[Component] = field(default_factory=list)  # filled by the inventory check

    def finding(
        self,
        check: str,
        reason: str,
        severity: Severity,
        evidence: str,
        component: Component = NODE,
        xid: int | None = None,
    ) -> Finding:
        return Finding(
            node=self.node,
            check=check,
            reason=reason,
            severity=severity,
            component=component,
            xid=xid,
            evidence=evidence,
            observed_at=self.now(),
        )


def as_text(value: str | bytes) -> str:
    """NVML answers bytes in older bindings and str in newer ones."""
    return value.decode() if isinstance(value, bytes) else value


def gpus_of(ctx: CheckContext) -> Iterator[tuple[Any, Component]]:
    """Handles of the GPUs NVML can still reach; the inventory check reports the lost ones."""
    for index in range(ctx.nvml.nvmlDeviceGetCount()):
        try:
            yield ctx.nvml.nvmlDeviceGetHandleByIndex(index), _component(ctx, index)
        except nv.NVMLError_GpuIsLost:
            continue


def _component(ctx: CheckContext, index: int) -> Component:
    known = next((g for g in ctx.gpus if g.index == index), None)
    return known or Component(kind=ComponentKind.GPU, index=index)


def supported(call: Callable[..., Any], *args: Any) -> Any | None:
    """``call(*args)``, or None when this GPU does not support the query."""
    try:
        return call(*args)
    except nv.NVMLError_NotSupported:
        return None
