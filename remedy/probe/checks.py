"""The probe's checks. Each takes the context and returns findings; raising is the runner's
business (fail closed). Reasons are stable CamelCase codes that runbooks match on.

A query a GPU does not support (NVMLError_NotSupported) is skipped, not a fault: older GPUs lack
row remapping, most nodes lack NVSwitch fabric. Any other NVML error fails the check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from remedy import gpu as nv
from remedy.gpu import NvmlApi
from remedy.models import Component, ComponentKind, Finding, Severity
from remedy.probe.nics import NicSource

NODE = Component(kind=ComponentKind.NODE)

_THROTTLE_REASONS = (
    (nv.nvmlClocksEventReasonHwThermalSlowdown, "HwThermalSlowdown"),
    (nv.nvmlClocksEventReasonHwPowerBrakeSlowdown, "HwPowerBrakeSlowdown"),
    (nv.nvmlClocksEventReasonHwSlowdown, "HwSlowdown"),
)
_RECOVERY_ACTIONS = {
    nv.NVML_GPU_RECOVERY_ACTION_GPU_RESET: ("RecoveryActionGpuReset", "a GPU reset"),
    nv.NVML_GPU_RECOVERY_ACTION_NODE_REBOOT: ("RecoveryActionNodeReboot", "a node reboot"),
    nv.NVML_GPU_RECOVERY_ACTION_DRAIN_P2P: ("RecoveryActionDrainP2P", "draining P2P traffic"),
    nv.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET: (
        "RecoveryActionDrainAndReset",
        "a drain and a GPU reset",
    ),
    nv.NVML_GPU_RECOVERY_ACTION_SYSTEM_REBOOT: (
        "RecoveryActionSystemReboot",
        "a system reboot",
    ),
}


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


def _gpus(ctx: CheckContext) -> Iterator[tuple[Any, Component]]:
    """Handles of the GPUs NVML can still reach; the inventory check reports the lost ones."""
    for index in range(ctx.nvml.nvmlDeviceGetCount()):
        try:
            yield ctx.nvml.nvmlDeviceGetHandleByIndex(index), _component(ctx, index)
        except nv.NVMLError_GpuIsLost:
            continue


def _component(ctx: CheckContext, index: int) -> Component:
    known = next((g for g in ctx.gpus if g.index == index), None)
    return known or Component(kind=ComponentKind.GPU, index=index)


def _supported(call: Callable[..., Any], *args: Any) -> Any | None:
    """``call(*args)``, or None when this GPU does not support the query."""
    try:
        return call(*args)
    except nv.NVMLError_NotSupported:
        return None


def check_inventory(ctx: CheckContext) -> list[Finding]:
    """GPU count against what the node should have, and who each GPU is."""
    findings = []
    count = ctx.nvml.nvmlDeviceGetCount()
    for index in range(count):
        try:
            handle = ctx.nvml.nvmlDeviceGetHandleByIndex(index)
            pci = ctx.nvml.nvmlDeviceGetPciInfo(handle)
            ctx.gpus.append(
                Component(
                    kind=ComponentKind.GPU,
                    index=index,
                    uuid=as_text(ctx.nvml.nvmlDeviceGetUUID(handle)),
                    serial=as_text(ctx.nvml.nvmlDeviceGetSerial(handle)),
                    pci_bus_id=as_text(pci.busId).lower(),
                    architecture=_architecture(ctx.nvml, handle),
                )
            )
        except nv.NVMLError_GpuIsLost:
            findings.append(
                ctx.finding(
                    "inventory",
                    "GpuFallenOffBus",
                    Severity.CRITICAL,
                    f"GPU {index}: NVML reports the GPU is lost",
                    Component(kind=ComponentKind.GPU, index=index),
                )
            )
    if ctx.expected_gpus is not None and count < ctx.expected_gpus:
        findings.append(
            ctx.finding(
                "inventory",
                "GpuMissing",
                Severity.CRITICAL,
                f"NVML sees {count} GPUs, the node should have {ctx.expected_gpus}",
            )
        )
    return findings


def _architecture(nvml: NvmlApi, handle: Any) -> int | None:
    """The GPU's NVML architecture; None where this NVML cannot say (the catalog then reads
    the current generation's table)."""
    try:
        return int(nvml.nvmlDeviceGetArchitecture(handle))
    except nv.NVMLError_GpuIsLost:
        raise
    except nv.NVMLError:
        return None


def check_memory(ctx: CheckContext) -> list[Finding]:
    out = []
    for handle, gpu in _gpus(ctx):
        uncorrected = _supported(
            ctx.nvml.nvmlDeviceGetTotalEccErrors,
            handle,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        if uncorrected:
            out.append(
                ctx.finding(
                    "memory",
                    "EccUncorrectable",
                    Severity.CRITICAL,
                    f"{uncorrected} uncorrectable ECC errors since the last reset",
                    gpu,
                )
            )
        remap = _supported(ctx.nvml.nvmlDeviceGetRemappedRows, handle)
        if remap is not None:
            _corr, _unc, pending, failure = remap
            if failure:
                out.append(
                    ctx.finding(
                        "memory",
                        "RowRemapFailure",
                        Severity.CRITICAL,
                        "row remapping failed: no spare rows left",
                        gpu,
                    )
                )
            elif pending:
                out.append(
                    ctx.finding(
                        "memory",
                        "RowRemapPending",
                        Severity.WARNING,
                        "a row remap is pending; it takes effect after a reset",
                        gpu,
                    )
                )
        else:  # before Ampere: page retirement instead of row remapping
            retired = _supported(ctx.nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
            if retired:
                out.append(
                    ctx.finding(
                        "memory",
                        "RetiredPagesPending",
                        Severity.WARNING,
                        "retired pages are pending; they take effect after a reset",
                        gpu,
                    )
                )
        out.extend(_recovery_action(ctx, handle, gpu))
    return out


def _recovery_action(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    """The driver's own verdict (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), where it exposes one."""
    values = _supported(
        lambda: ctx.nvml.nvmlDeviceGetFieldValues(handle, [nv.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])
    )
    if not values or values[0].nvmlReturn != nv.NVML_SUCCESS:
        return []
    action = int(values[0].value.uiVal)
    if action not in _RECOVERY_ACTIONS:
        return []
    reason, needs = _RECOVERY_ACTIONS[action]
    return [
        ctx.finding(
            "memory", reason, Severity.CRITICAL, f"the driver says this GPU needs {needs}", gpu
        )
    ]


def check_throttle(ctx: CheckContext) -> list[Finding]:
    out = []
    for handle, gpu in _gpus(ctx):
        reasons = _supported(ctx.nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
        for bit, name in _THROTTLE_REASONS:
            if reasons and reasons & bit:
                out.append(
                    ctx.finding(
                        "thermal", name, Severity.WARNING, f"clock event reasons 0x{reasons:x}", gpu
                    )
                )
                break  # one slowdown finding per GPU; the bits tell the same story
        temperature = _supported(ctx.nvml.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
        if temperature is not None and temperature >= ctx.max_temperature_c:
            out.append(
                ctx.finding(
                    "thermal",
                    "GpuOverTemperature",
                    Severity.WARNING,
                    f"{temperature} °C ≥ {ctx.max_temperature_c} °C",
                    gpu,
                )
            )
    return out


def check_pcie(ctx: CheckContext) -> list[Finding]:
    """A link narrower than it can be is a fault. The generation is not compared: idle GPUs
    downshift their link to save power, so a low current generation is normal."""
    out = []
    for handle, gpu in _gpus(ctx):
        width = _supported(ctx.nvml.nvmlDeviceGetCurrPcieLinkWidth, handle)
        max_width = _supported(ctx.nvml.nvmlDeviceGetMaxPcieLinkWidth, handle)
        if width is not None and max_width and width < max_width:
            out.append(
                ctx.finding(
                    "pcie",
                    "PcieWidthDegraded",
                    Severity.WARNING,
                    f"PCIe link x{width}, capable of x{max_width}",
                    gpu,
                )
            )
    return out


def check_nvlink(ctx: CheckContext) -> list[Finding]:
    out = []
    for handle, gpu in _gpus(ctx):
        down = []
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                state = ctx.nvml.nvmlDeviceGetNvLinkState(handle, link)
            except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
                continue  # this link does not exist on this GPU
            if state != nv.NVML_FEATURE_ENABLED:
                down.append(link)
        if down:
            out.append(
                ctx.finding(
                    "nvlink",
                    "NvLinkDown",
                    Severity.CRITICAL,
                    f"NVLink links down: {', '.join(map(str, down))}",
                    gpu,
                )
            )
        out.extend(_fabric(ctx, handle, gpu))
    return out


def _fabric(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    """On NVSwitch systems the GPU must have joined the fabric (Fabric Manager up)."""
    state = _supported(lambda: ctx.nvml.gpu_fabric_state(handle))
    if state is None or state == nv.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
        return []
    if state != nv.NVML_GPU_FABRIC_STATE_COMPLETED:
        return [
            ctx.finding(
                "nvlink",
                "FabricNotReady",
                Severity.CRITICAL,
                f"GPU fabric registration state {state}, not completed",
                gpu,
            )
        ]
    return []


# Inventory runs first (it names the GPUs); the rest run side by side, each with its timeout.
GPU_CHECKS: dict[str, Callable[[CheckContext], list[Finding]]] = {
    "memory": check_memory,
    "thermal": check_throttle,
    "pcie": check_pcie,
    "nvlink": check_nvlink,
}
