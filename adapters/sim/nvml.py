"""A simulated NVML with pynvml's function names and return shapes, raising the seam's errors
(remedy/detection/gpu.py), over the twin's
GPU table. The probe runs unchanged against it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from adapters.sim.faults import Effect
from remedy.detection import gpu as nv

if TYPE_CHECKING:
    from adapters.sim.node import SimNode

NVLINKS = 18  # links per H100/H200 GPU
CRC_LINK = 5  # the link an NVLink CRC fault plays on
CRC_PER_S = 1_000_000  # its CRC flit errors a second, far past DCGM's 100/s
# The fabric's health as a healthy H100 reports it: each field "false", the configuration "none".
HEALTHY_FABRIC = (
    2 << nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
    | 2 << nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY
    | 2 << nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY
    | nv.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE
    << nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION
)
PCIE_WIDTH = 16
MIG_SLOTS = 7  # MIG devices an H100/H200 can hold


@dataclass(frozen=True)
class SimMigHandle:
    """A MIG device: GPU instance ``instance`` of GPU ``gpu``."""

    gpu: int
    instance: int


@dataclass
class SimEvent:
    """Shaped like pynvml's c_nvmlEventData_t."""

    device: int
    eventType: int
    eventData: int


class SimNvml:
    def __init__(self, node: SimNode) -> None:
        self._node = node
        self._initialized = 0

    # -- library --------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        broken = self._node.nvml_broken
        if broken == "missing":
            raise nv.NVMLError(nv.NVML_ERROR_LIBRARY_NOT_FOUND)
        if broken == "driver":
            raise nv.NVMLError(nv.NVML_ERROR_DRIVER_NOT_LOADED)
        if broken == "hang":
            threading.Event().wait(3600)  # a wedged driver: the call never returns
        self._initialized += 1

    def nvmlShutdown(self) -> None:
        self._ready()
        self._initialized -= 1

    def _ready(self) -> None:
        if not self._initialized:
            raise nv.NVMLError(nv.NVML_ERROR_UNINITIALIZED)

    def _effects(self, handle: int) -> set[Effect]:
        self._ready()
        effects = self._node.effects(handle)
        if Effect.LOST in effects:
            raise nv.NVMLError(nv.NVML_ERROR_GPU_IS_LOST)
        if Effect.HANG in effects:
            threading.Event().wait(3600)
        return effects

    # -- identity -------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._ready()
        return len(self._node.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._ready()
        if not 0 <= index < len(self._node.gpus):
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        self._effects(index)
        return index

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetUUID(self, handle: int | SimMigHandle) -> str:
        if isinstance(handle, SimMigHandle):
            self._effects(handle.gpu)
            return f"MIG-{self._node.gpus[handle.gpu].uuid[4:]}-{handle.instance}"
        self._effects(handle)
        return self._node.gpus[handle].uuid

    def nvmlDeviceGetSerial(self, handle: int) -> str:
        self._effects(handle)
        return self._node.gpus[handle].serial

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        self._effects(handle)
        # Shaped like pynvml's nvmlPciInfo_t: the bus id as bytes.
        return SimpleNamespace(busId=f"00000000:{0x18 + 0x10 * handle:02X}:00.0".encode())

    def nvmlDeviceGetArchitecture(self, handle: int) -> int:
        self._effects(handle)
        return self._node.gpus[handle].architecture

    # -- memory ---------------------------------------------------------------------------
    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        effects = self._effects(handle)
        pending = int(Effect.ECC in effects)
        failure = int(Effect.REMAP_FAILURE in effects)
        return (0, pending + failure, pending, failure)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        self._effects(handle)
        raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)  # Hopper remaps rows instead

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter_type: int) -> int:
        effects = self._effects(handle)
        if (
            error_type == nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            and counter_type == nv.NVML_VOLATILE_ECC
        ):
            return int(Effect.ECC in effects)
        return 0

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> Any:
        effects = self._effects(handle)
        # Shaped like pynvml's c_nvmlFieldValue_t array: a return code and a value union each.
        values = []
        for field_id in field_ids:
            value = SimpleNamespace(fieldId=field_id, nvmlReturn=nv.NVML_ERROR_NOT_SUPPORTED)
            if field_id == nv.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                action = (
                    nv.NVML_GPU_RECOVERY_ACTION_GPU_RESET
                    if Effect.ECC in effects
                    else nv.NVML_GPU_RECOVERY_ACTION_NONE
                )
                value.nvmlReturn = nv.NVML_SUCCESS
                value.valueType = nv.NVML_VALUE_TYPE_UNSIGNED_INT
                value.value = SimpleNamespace(uiVal=action)
            values.append(value)
        return values

    # -- clocks, thermals, links ----------------------------------------------------------
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        if Effect.THROTTLE in self._effects(handle):
            return int(
                nv.nvmlClocksEventReasonHwThermalSlowdown | nv.nvmlClocksEventReasonHwSlowdown
            )
        return int(nv.nvmlClocksEventReasonGpuIdle)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 91 if Effect.THROTTLE in self._effects(handle) else 46

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return 8 if Effect.PCIE_DEGRADED in self._effects(handle) else PCIE_WIDTH

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        self._effects(handle)
        return PCIE_WIDTH

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        effects = self._effects(handle)
        if link >= NVLINKS:
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        down = Effect.NVLINK_DOWN in effects and link == 3
        return int(nv.NVML_FEATURE_DISABLED if down else nv.NVML_FEATURE_ENABLED)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: int, link: int, counter: int) -> int:
        """Zero on a healthy link (a reset zeroes them: so does clearing the fault); a CRC
        fault's link counts flit errors at ``CRC_PER_S`` of real time since it was first read,
        and a second's worth before (a window of earlier healthy samples sees the climb)."""
        effects = self._effects(handle)
        if link >= NVLINKS:
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        if Effect.NVLINK_CRC not in effects:
            self._node.crc_since.pop(handle, None)  # cleared: the reset zeroed the counters
            return 0
        if link != CRC_LINK or counter != nv.NVML_NVLINK_ERROR_DL_CRC_FLIT:
            return 0
        since = self._node.crc_since.setdefault(handle, time.monotonic())
        return int((time.monotonic() - since + 1) * CRC_PER_S)

    def gpu_fabric_info(self, handle: int) -> nv.GpuFabricInfo:
        effects = self._effects(handle)
        if not self._node.nvswitch:
            raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)
        health = HEALTHY_FABRIC
        if Effect.FABRIC_DEGRADED in effects:  # the degraded-bandwidth field "true"
            health = health & ~0x3 | nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE
        return nv.GpuFabricInfo(nv.NVML_GPU_FABRIC_STATE_COMPLETED, nv.NVML_SUCCESS, health)

    # -- MIG ----------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        self._effects(handle)
        mode = nv.NVML_DEVICE_MIG_ENABLE if self._node.gpus[handle].mig else 0
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: int) -> int:
        self._effects(handle)
        return MIG_SLOTS if self._node.gpus[handle].mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: int, index: int) -> SimMigHandle:
        self._effects(handle)
        gpu = self._node.gpus[handle]
        if not gpu.mig or not 0 <= index < MIG_SLOTS:
            raise nv.NVMLError(nv.NVML_ERROR_INVALID_ARGUMENT)
        if index >= len(gpu.mig_instances):
            raise nv.NVMLError(nv.NVML_ERROR_NOT_FOUND)  # an empty slot
        return SimMigHandle(handle, gpu.mig_instances[index])

    def nvmlDeviceGetGpuInstanceId(self, handle: SimMigHandle) -> int:
        self._effects(handle.gpu)
        return handle.instance

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int | SimMigHandle) -> list[Any]:
        """A process per pod on the device: on a MIG device, the pods on that instance."""
        gpu = handle.gpu if isinstance(handle, SimMigHandle) else handle
        self._effects(gpu)
        name = f"GPU-I:{handle.instance:02d}" if isinstance(handle, SimMigHandle) else None
        pods = [
            p
            for p in self._node.pods
            if p.uses_gpus and (not p.gpus or gpu in p.gpus) and (name is None or p.mig == name)
        ]
        procs = []
        for n, _pod in enumerate(pods):
            # Shaped like pynvml's c_nvmlProcessInfo_t.
            procs.append(SimpleNamespace(pid=4000 + 100 * gpu + n, usedGpuMemory=1 << 30))
        return procs

    # -- Xid events -----------------------------------------------------------------------
    def nvmlEventSetCreate(self) -> list[SimEvent]:
        self._ready()
        return []

    def nvmlDeviceRegisterEvents(self, handle: int, event_types: int, event_set: Any) -> None:
        self._effects(handle)

    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> SimEvent:
        self._ready()
        xid = self._node.pop_xid(timeout_ms / 1000)
        if xid is None:
            raise nv.NVMLError(nv.NVML_ERROR_TIMEOUT)
        gpu, code = xid
        return SimEvent(device=gpu, eventType=nv.nvmlEventTypeXidCriticalError, eventData=code)

    def nvmlEventSetFree(self, event_set: Any) -> None:
        pass
