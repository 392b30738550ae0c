"""The probe's GPU checks. Each takes the context (remedy/detection/probe/context.py) and returns
findings; raising is the runner's business (fail closed). Reasons are stable CamelCase codes
that runbooks match on, declared once, beside the check that reports them (``CheckTerms``,
remedy/detection/check_terms.py); ``GPU_CHECKS`` runs them and ``TERMS`` names them for the
vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection import gpu as nv
from remedy.detection.check_terms import CheckTerms
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.context import CheckContext, as_text, gpus_of, supported
from remedy.detection.probe.fabric_manager import FABRIC_MANAGER
from remedy.detection.probe.nvlink import NVLINK, check_nvlink

INVENTORY = CheckTerms(
    "inventory", "the GPUs NVML sees against those the node should have", probe=True
)
FALLEN_OFF_BUS = INVENTORY.reason("GpuFallenOffBus", "NVML reports a GPU as lost")
GPU_MISSING = INVENTORY.reason("GpuMissing", "fewer GPUs than the node should have")


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
                    INVENTORY.check,
                    FALLEN_OFF_BUS,
                    Severity.CRITICAL,
                    f"GPU {index}: NVML reports the GPU is lost",
                    Component(kind=ComponentKind.GPU, index=index),
                )
            )
    if ctx.expected_gpus is not None and count < ctx.expected_gpus:
        findings.append(
            ctx.finding(
                INVENTORY.check,
                GPU_MISSING,
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


MEMORY = CheckTerms(
    "memory", "ECC errors, row remapping and the driver's recovery action", probe=True
)
ECC = MEMORY.reason("EccUncorrectable", "uncorrectable ECC errors since the last reset")
REMAP_FAILURE = MEMORY.reason("RowRemapFailure", "row remapping failed: no spare rows left")
REMAP_PENDING = MEMORY.reason("RowRemapPending", "a row remap waits for a reset")
PAGES_PENDING = MEMORY.reason(
    "RetiredPagesPending", "retired pages wait for a reset (before Ampere)"
)
# The driver's recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): its reason, what it needs.
_RECOVERY_ACTIONS = {
    value: (MEMORY.reason(reason, f"the driver asks for {needs}"), needs)
    for value, reason, needs in (
        (nv.NVML_GPU_RECOVERY_ACTION_GPU_RESET, "RecoveryActionGpuReset", "a GPU reset"),
        (nv.NVML_GPU_RECOVERY_ACTION_NODE_REBOOT, "RecoveryActionNodeReboot", "a node reboot"),
        (
            nv.NVML_GPU_RECOVERY_ACTION_DRAIN_P2P,
            "RecoveryActionDrainP2P",
            "a drain of P2P traffic",
        ),
        (
            nv.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
            "RecoveryActionDrainAndReset",
            "a drain and a GPU reset",
        ),
        (
            nv.NVML_GPU_RECOVERY_ACTION_SYSTEM_REBOOT,
            "RecoveryActionSystemReboot",
            "a system reboot",
        ),
    )
}


def check_memory(ctx: CheckContext) -> list[Finding]:
    out = []
    for handle, gpu in gpus_of(ctx):
        uncorrected = supported(
            ctx.nvml.nvmlDeviceGetTotalEccErrors,
            handle,
            nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            nv.NVML_VOLATILE_ECC,
        )
        if uncorrected:
            out.append(
                ctx.finding(
                    MEMORY.check,
                    ECC,
                    Severity.CRITICAL,
                    f"{uncorrected} uncorrectable ECC errors since the last reset",
                    gpu,
                )
            )
        remap = supported(ctx.nvml.nvmlDeviceGetRemappedRows, handle)
        if remap is not None:
            _corr, _unc, pending, failure = remap
            if failure:
                out.append(
                    ctx.finding(
                        MEMORY.check,
                        REMAP_FAILURE,
                        Severity.CRITICAL,
                        "row remapping failed: no spare rows left",
                        gpu,
                    )
                )
            elif pending:
                out.append(
                    ctx.finding(
                        MEMORY.check,
                        REMAP_PENDING,
                        Severity.WARNING,
                        "a row remap is pending; it takes effect after a reset",
                        gpu,
                    )
                )
        else:  # before Ampere: page retirement instead of row remapping
            retired = supported(ctx.nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
            if retired:
                out.append(
                    ctx.finding(
                        MEMORY.check,
                        PAGES_PENDING,
                        Severity.WARNING,
                        "retired pages are pending; they take effect after a reset",
                        gpu,
                    )
                )
        out.extend(_recovery_action(ctx, handle, gpu))
    return out


def _recovery_action(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    """The driver's own verdict (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), where it exposes one."""
    values = supported(
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
            MEMORY.check, reason, Severity.CRITICAL, f"the driver says this GPU needs {needs}", gpu
        )
    ]


# A slowdown follows load, airflow and power: the probe reports every one as a warning, the
# fleet twin's thermal fault passes in two minutes, and the shipped runbook tolerates ten
# before it drains.
THERMAL = CheckTerms("thermal", "clock slowdowns and temperature", probe=True, transient=True)
THERMAL_SLOWDOWN = THERMAL.reason("HwThermalSlowdown", "hardware thermal slowdown")
POWER_BRAKE = THERMAL.reason("HwPowerBrakeSlowdown", "hardware power-brake slowdown")
SLOWDOWN = THERMAL.reason("HwSlowdown", "hardware slowdown")
_THROTTLE_REASONS = (
    (nv.nvmlClocksEventReasonHwThermalSlowdown, THERMAL_SLOWDOWN),
    (nv.nvmlClocksEventReasonHwPowerBrakeSlowdown, POWER_BRAKE),
    (nv.nvmlClocksEventReasonHwSlowdown, SLOWDOWN),
)
OVER_TEMPERATURE = THERMAL.reason("GpuOverTemperature", "the GPU is over its temperature limit")


def check_throttle(ctx: CheckContext) -> list[Finding]:
    out = []
    for handle, gpu in gpus_of(ctx):
        reasons = supported(ctx.nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
        for bit, name in _THROTTLE_REASONS:
            if reasons and reasons & bit:
                out.append(
                    ctx.finding(
                        THERMAL.check,
                        name,
                        Severity.WARNING,
                        f"clock event reasons 0x{reasons:x}",
                        gpu,
                    )
                )
                break  # one slowdown finding per GPU; the bits tell the same story
        temperature = supported(ctx.nvml.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU)
        if temperature is not None and temperature >= ctx.max_temperature_c:
            out.append(
                ctx.finding(
                    THERMAL.check,
                    OVER_TEMPERATURE,
                    Severity.WARNING,
                    f"{temperature} °C ≥ {ctx.max_temperature_c} °C",
                    gpu,
                )
            )
    return out


PCIE = CheckTerms("pcie", "the GPU's PCIe link", probe=True)
WIDTH_DEGRADED = PCIE.reason("PcieWidthDegraded", "the link runs narrower than it can")


def check_pcie(ctx: CheckContext) -> list[Finding]:
    """A link narrower than it can be is a fault. The generation is not compared: idle GPUs
    downshift their link to save power, so a low current generation is normal."""
    out = []
    for handle, gpu in gpus_of(ctx):
        width = supported(ctx.nvml.nvmlDeviceGetCurrPcieLinkWidth, handle)
        max_width = supported(ctx.nvml.nvmlDeviceGetMaxPcieLinkWidth, handle)
        if width is not None and max_width and width < max_width:
            out.append(
                ctx.finding(
                    PCIE.check,
                    WIDTH_DEGRADED,
                    Severity.WARNING,
                    f"PCIe link x{width}, capable of x{max_width}",
                    gpu,
                )
            )
    return out


# Inventory runs first (it names the GPUs); the rest run side by side, each with its timeout.
_GPU: tuple[tuple[CheckTerms, Callable[[CheckContext], list[Finding]]], ...] = (
    (MEMORY, check_memory),
    (THERMAL, check_throttle),
    (PCIE, check_pcie),
    (NVLINK, check_nvlink),
)
GPU_CHECKS = {terms.check: check for terms, check in _GPU}
# Fabric Manager's check runs beside them where the node says how to read the service.
TERMS = (INVENTORY, *(terms for terms, _ in _GPU), FABRIC_MANAGER)  # for the vocabulary
