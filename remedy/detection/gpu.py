"""The GPU backend seam: the slice of the NVML API the probe uses, the NVML constants it reads
and the errors it catches.

The real backend (``adapters.host.nvml``) is the ``pynvml`` module of nvidia-ml-py behind a
wrapper that raises these ``NVMLError`` classes for pynvml's; the simulated one
(``adapters.sim.nvml``) has the same function names and raises the same errors, so the probe
code under test is the code that runs on a node. Nothing else imports pynvml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

# NVML's return codes and the constants the probe reads (nvml.h; tests/test_gpu_seam.py checks
# each against pynvml's).
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_DEVICE_MIG_ENABLE = 1
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230
NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE = 1
NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE = 1
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY = 6
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW = 0
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION = 8
NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY = 4
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW = 0x3
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION = 0xF
NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY = 0x3
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_GPU_RECOVERY_ACTION_NONE = 0
NVML_GPU_RECOVERY_ACTION_GPU_RESET = 1
NVML_GPU_RECOVERY_ACTION_NODE_REBOOT = 2
NVML_GPU_RECOVERY_ACTION_DRAIN_P2P = 3
NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET = 4
NVML_GPU_RECOVERY_ACTION_SYSTEM_REBOOT = 7
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_NVLINK_MAX_LINKS = 36
NVML_TEMPERATURE_GPU = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VOLATILE_ECC = 0
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonHwSlowdown = 0x8
nvmlClocksEventReasonHwThermalSlowdown = 0x40
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
nvmlEventTypeXidCriticalError = 0x8


class NVMLError(Exception):
    """An NVML call failed with return code ``value``. Like pynvml's, ``NVMLError(code)`` is
    the subclass for that code where there is one, so ``except NVMLError_GpuIsLost`` works."""

    code: ClassVar[int | None] = None
    value: int

    def __new__(cls, value: int, message: str = "") -> NVMLError:
        sub = next((c for c in _SUBCLASSES if c.code == value), cls) if cls is NVMLError else cls
        return super().__new__(sub)

    def __init__(self, value: int, message: str = "") -> None:
        super().__init__(value)
        self.value = value
        self.message = message  # the library's words for it, where it said

    def __str__(self) -> str:
        return self.message or f"NVML error {self.value}"


class NVMLError_Uninitialized(NVMLError):  # noqa: N801 (pynvml's names, kept)
    code = NVML_ERROR_UNINITIALIZED


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    code = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    code = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NotFound(NVMLError):  # noqa: N801
    code = NVML_ERROR_NOT_FOUND


class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
    code = NVML_ERROR_DRIVER_NOT_LOADED


class NVMLError_Timeout(NVMLError):  # noqa: N801
    code = NVML_ERROR_TIMEOUT


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    code = NVML_ERROR_LIBRARY_NOT_FOUND


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801
    code = NVML_ERROR_FUNCTION_NOT_FOUND


class NVMLError_GpuIsLost(NVMLError):  # noqa: N801
    code = NVML_ERROR_GPU_IS_LOST


_SUBCLASSES = (
    NVMLError_Uninitialized,
    NVMLError_InvalidArgument,
    NVMLError_NotSupported,
    NVMLError_NotFound,
    NVMLError_DriverNotLoaded,
    NVMLError_Timeout,
    NVMLError_LibraryNotFound,
    NVMLError_FunctionNotFound,
    NVMLError_GpuIsLost,
)


@dataclass(frozen=True)
class GpuFabricInfo:
    """A GPU's place in the NVSwitch fabric (nvmlGpuFabricInfo): its registration ``state``
    (``NVML_GPU_FABRIC_STATE_*``), the registration's result ``status`` (an NVML return code,
    meaningful once the state is completed) and the ``health_mask`` (``NVML_GPU_FABRIC_HEALTH_
    MASK_*`` fields; None where only the first version of the call exists)."""

    state: int
    status: int = NVML_SUCCESS
    health_mask: int | None = None

    def health(self, shift: int, width: int) -> int:
        """One field of the health mask (0, "not supported", without a mask)."""
        return 0 if self.health_mask is None else (self.health_mask >> shift) & width


class NvmlApi(Protocol):
    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetSerial(self, handle: Any) -> str: ...
    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]: ...
    def nvmlDeviceGetTotalEccErrors(
        self, handle: Any, error_type: int, counter_type: int
    ) -> int: ...
    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...
    def nvmlDeviceGetIndex(self, handle: Any) -> int: ...
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetArchitecture(self, handle: Any) -> int: ...
    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int: ...
    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[int]) -> Any: ...
    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int: ...
    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int: ...
    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int: ...
    def nvmlDeviceGetNvLinkErrorCounter(self, handle: Any, link: int, counter: int) -> int: ...
    def gpu_fabric_info(self, handle: Any) -> GpuFabricInfo:
        """The GPU's fabric state and health (nvmlDeviceGetGpuFabricInfoV, else the first
        version's state alone); NVMLError_NotSupported on a GPU with no NVSwitch fabric."""
        ...

    # MIG: a GPU reset needs every instance idle (adapters/host/mig.py)
    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]: ...
    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int: ...
    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any: ...
    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None: ...
    def nvmlEventSetWait_v2(self, event_set: Any, timeout_ms: int) -> Any: ...
    def nvmlEventSetFree(self, event_set: Any) -> None: ...
