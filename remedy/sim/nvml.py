"""A simulated NVML with pynvml's function names and exceptions, over the twin's GPU table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pynvml

from remedy.sim.faults import Effect

if TYPE_CHECKING:
    from remedy.sim.fleet import SimNode


class SimNvml:
    def __init__(self, node: SimNode) -> None:
        self._node = node
        self._initialized = 0

    def nvmlInit(self) -> None:
        self._initialized += 1

    def nvmlShutdown(self) -> None:
        if not self._initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        self._initialized -= 1

    def _ready(self) -> None:
        if not self._initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu_effects(self, handle: int) -> set[Effect]:
        self._ready()
        effects = self._node.effects(handle)
        if Effect.LOST in effects:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return effects

    def nvmlDeviceGetCount(self) -> int:
        self._ready()
        return len(self._node.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._ready()
        if not 0 <= index < len(self._node.gpus):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        self._gpu_effects(index)
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self._gpu_effects(handle)
        return self._node.gpus[handle].uuid

    def nvmlDeviceGetSerial(self, handle: int) -> str:
        self._gpu_effects(handle)
        return self._node.gpus[handle].serial

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        effects = self._gpu_effects(handle)
        pending = int(Effect.ECC in effects)
        failure = int(Effect.REMAP_FAILURE in effects)
        return (0, pending + failure, pending, failure)

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter_type: int) -> int:
        effects = self._gpu_effects(handle)
        if (error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
                and counter_type == pynvml.NVML_VOLATILE_ECC):
            return int(Effect.ECC in effects)
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        effects = self._gpu_effects(handle)
        if Effect.THROTTLE in effects:
            return int(pynvml.nvmlClocksEventReasonHwThermalSlowdown
                       | pynvml.nvmlClocksEventReasonHwSlowdown)
        return int(pynvml.nvmlClocksEventReasonNone)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        effects = self._gpu_effects(handle)
        return 91 if Effect.THROTTLE in effects else 46
