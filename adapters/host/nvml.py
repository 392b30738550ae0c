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

    def gpu_fabric_state(self, handle: Any) -> int:
        info = self._module.c_nvmlGpuFabricInfo_t()
        self._translated(self._module.nvmlDeviceGetGpuFabricInfo)(handle, ctypes.byref(info))
        return int(info.state)


def real_nvml() -> NvmlApi:
    """The real NVML bindings; importing them needs no driver, calling nvmlInit does."""
    import pynvml

    return cast(NvmlApi, _Pynvml(pynvml))
