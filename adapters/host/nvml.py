"""The real GPU backend: the ``pynvml`` module of nvidia-ml-py itself."""

from __future__ import annotations

from typing import cast

from remedy.gpu import NvmlApi


def real_nvml() -> NvmlApi:
    """The real NVML bindings; importing them needs no driver, calling nvmlInit does."""
    import pynvml

    return cast(NvmlApi, pynvml)
