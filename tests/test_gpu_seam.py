"""The GPU seam (remedy/detection/gpu.py): its NVML constants are pynvml's, its errors are pynvml's
classes by code, and the real backend raises them for pynvml's."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from adapters.host.nvml import _Pynvml
from remedy.detection import gpu


def test_the_constants_are_pynvmls() -> None:
    names = [n for n in vars(gpu) if n.startswith(("NVML_", "nvml")) and n != "NvmlApi"]
    assert names
    assert {n: getattr(gpu, n) for n in names} == {n: getattr(pynvml, n) for n in names}


def test_an_error_is_the_class_for_its_code() -> None:
    assert type(gpu.NVMLError(gpu.NVML_ERROR_GPU_IS_LOST)) is gpu.NVMLError_GpuIsLost
    assert type(gpu.NVMLError(gpu.NVML_ERROR_NOT_SUPPORTED)) is gpu.NVMLError_NotSupported
    other = gpu.NVMLError(999)
    assert type(other) is gpu.NVMLError and other.value == 999


class _Module:
    """Stands in for pynvml: its error class and a call that fails with it."""

    NVMLError = pynvml.NVMLError
    NVML_SUCCESS = pynvml.NVML_SUCCESS

    def nvmlDeviceGetCount(self) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    def nvmlInit(self) -> None:
        return None


def test_the_real_backend_raises_the_seams_errors() -> None:
    real: Any = _Pynvml(_Module())
    real.nvmlInit()
    assert real.NVML_SUCCESS == 0
    with pytest.raises(gpu.NVMLError_GpuIsLost) as raised:
        real.nvmlDeviceGetCount()
    assert isinstance(raised.value.__cause__, pynvml.NVMLError)
    assert str(raised.value) == str(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST))


def test_every_code_with_a_class_in_pynvml_has_one_here() -> None:
    codes = [v for n, v in vars(gpu).items() if n.startswith("NVML_ERROR_")]
    for code in codes:
        assert type(gpu.NVMLError(code)).__name__ == type(pynvml.NVMLError(code)).__name__


class _Fabric:
    """pynvml's fabric calls over its own structures: V (state, status, health mask), or only
    the first version (an older driver), or neither."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpuFabricInfoV_t = pynvml.c_nvmlGpuFabricInfoV_t
    c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t

    def __init__(self, versions: int) -> None:
        self.versions = versions

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, info: Any) -> int:
        if self.versions < 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info._obj.state = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
        info._obj.healthMask = 0x1A1  # degraded bandwidth
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, info: Any) -> int:
        if self.versions < 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info._obj.state = pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS
        return pynvml.NVML_SUCCESS


def test_the_real_backend_reads_the_fabric_info_its_driver_has() -> None:
    assert _Pynvml(_Fabric(2)).gpu_fabric_info(0) == gpu.GpuFabricInfo(3, 0, 0x1A1)
    assert _Pynvml(_Fabric(1)).gpu_fabric_info(0) == gpu.GpuFabricInfo(2, 0, None)
    with pytest.raises(gpu.NVMLError_NotSupported):  # a driver older than any fabric
        _Pynvml(_Fabric(0)).gpu_fabric_info(0)
