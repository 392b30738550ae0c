"""GPU checks. Each takes the NVML API and returns findings; raising is the runner's problem.

Reasons are stable CamelCase codes that runbooks match on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pynvml

from remedy.gpu import NvmlApi
from remedy.models import Component, ComponentKind, Finding, Severity

_THROTTLE_REASONS = (
    (pynvml.nvmlClocksEventReasonHwThermalSlowdown, "HwThermalSlowdown"),
    (pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"),
    (pynvml.nvmlClocksEventReasonHwSlowdown, "HwSlowdown"),
)


NODE = Component(kind=ComponentKind.NODE)


@dataclass(frozen=True)
class CheckContext:
    node: str
    nvml: NvmlApi
    expected_gpus: int | None
    now: Callable[[], datetime]
    max_temperature_c: int = 87

    def finding(self, check: str, reason: str, severity: Severity, evidence: str,
                component: Component = NODE, xid: int | None = None) -> Finding:
        return Finding(node=self.node, check=check, reason=reason, severity=severity,
                       component=component, xid=xid, evidence=evidence, observed_at=self.now())


def _gpu(index: int, nvml: NvmlApi, handle: Any) -> Component:
    # Identity is best effort: a GPU too broken to name itself is still reported by index.
    uuid: str | None
    serial: str | None
    try:
        uuid, serial = nvml.nvmlDeviceGetUUID(handle), nvml.nvmlDeviceGetSerial(handle)
    except pynvml.NVMLError:
        uuid = serial = None
    return Component(kind=ComponentKind.GPU, index=index, uuid=uuid, serial=serial)


def check_inventory(ctx: CheckContext) -> list[Finding]:
    count = ctx.nvml.nvmlDeviceGetCount()
    if ctx.expected_gpus is not None and count < ctx.expected_gpus:
        return [ctx.finding("inventory", "GpuMissing", Severity.CRITICAL,
                            f"NVML sees {count} GPUs, the node should have {ctx.expected_gpus}")]
    return []


def check_gpus(ctx: CheckContext) -> list[Finding]:
    """Per-GPU state: lost GPUs, memory errors, remaps and hardware slowdowns."""
    findings: list[Finding] = []
    for index in range(ctx.nvml.nvmlDeviceGetCount()):
        try:
            handle = ctx.nvml.nvmlDeviceGetHandleByIndex(index)
            component = _gpu(index, ctx.nvml, handle)
            findings.extend(_memory(ctx, handle, component))
            findings.extend(_throttle(ctx, handle, component))
        except pynvml.NVMLError_GpuIsLost:
            findings.append(ctx.finding("inventory", "GpuFallenOffBus", Severity.CRITICAL,
                                        f"GPU {index}: NVML reports the GPU is lost",
                                        Component(kind=ComponentKind.GPU, index=index)))
    return findings


def _memory(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    out = []
    uncorrected = ctx.nvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
    if uncorrected:
        out.append(ctx.finding("memory", "EccUncorrectable", Severity.CRITICAL,
                               f"{uncorrected} uncorrectable ECC errors since the last reset",
                               gpu))
    _corr, _unc, pending, failure = ctx.nvml.nvmlDeviceGetRemappedRows(handle)
    if failure:
        out.append(ctx.finding("memory", "RowRemapFailure", Severity.CRITICAL,
                               "row remapping failed: no spare rows left", gpu))
    elif pending:
        out.append(ctx.finding("memory", "RowRemapPending", Severity.WARNING,
                               "a row remap is pending and takes effect after a GPU reset", gpu))
    return out


def _throttle(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    out = []
    reasons = ctx.nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
    for bit, name in _THROTTLE_REASONS:
        if reasons & bit:
            out.append(ctx.finding("thermal", name, Severity.WARNING,
                                   f"clock event reasons 0x{reasons:x}", gpu))
            break  # one slowdown finding per GPU; the bits say the same thing
    temperature = ctx.nvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
    if temperature >= ctx.max_temperature_c:
        out.append(ctx.finding("thermal", "GpuOverTemperature", Severity.WARNING,
                               f"{temperature} °C ≥ {ctx.max_temperature_c} °C", gpu))
    return out


CHECKS: dict[str, Callable[[CheckContext], list[Finding]]] = {
    "inventory": check_inventory,
    "gpus": check_gpus,
}
