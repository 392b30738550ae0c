"""The real GPU backend: the ``pynvml`` module of nvidia-ml-py, behind the seam of
remedy/detection/gpu.py. The one module that imports pynvml: its errors become the seam's
``NVMLError`` classes, the rest passes through."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, cast

from remedy.detection import gpu
from remedy.detection.gpu import NvmlApi


class _Pynvml:
    """pynvml's functions, each raising ``remedy.detection.gpu.NVMLError`` for pynvml's."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._module, name)
        if not callable(found) or isinstance(found, type):
            return found
        return self._translated(found)

    def _translated(self, call: Callable[..., Any]) -> Callable[..., Any]:
        module = self._module

        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except module.NVMLError as err:
                raise gpu.NVMLError(err.value, str(err)) from err

        return run

    def gpu_fabric_info(self, handle: Any) -> gpu.GpuFabricInfo:
        """nvmlDeviceGetGpuFabricInfoV (state, status and health mask); a driver without it
        answers the first version's state and status, one without either "not supported"."""
        module = self._module
        info = module.c_nvmlGpuFabricInfoV_t()
        try:
            self._translated(module.nvmlDeviceGetGpuFabricInfoV)(handle, ctypes.byref(info))
        except gpu.NVMLError_FunctionNotFound:
            old = module.c_nvmlGpuFabricInfo_t()
            try:
                self._translated(module.nvmlDeviceGetGpuFabricInfo)(handle, ctypes.byref(old))
            except gpu.NVMLError_FunctionNotFound as exc:  # a driver older than any fabric
                raise gpu.NVMLError(gpu.NVML_ERROR_NOT_SUPPORTED, str(exc)) from exc
            return gpu.GpuFabricInfo(state=int(old.state), status=int(old.status))
        return gpu.GpuFabricInfo(
            state=int(info.state), status=int(info.status), health_mask=int(info.healthMask)
        )


def real_nvml() -> NvmlApi:
    """The real NVML bindings; importing them needs no driver, calling nvmlInit does."""
    import pynvml

    return cast(NvmlApi, _Pynvml(pynvml))
