"""Which pod uses which GPU of a node: the device plugin's whole GPUs, MIG instances and DRA
claims. The shared interface of issue 29 (the gpumap side owns this file; this copy is its
agreed content, taken as theirs at merge)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from remedy.models import Frozen


class GpuClaim(StrEnum):
    DEVICE_PLUGIN = "device_plugin"  # nvidia.com/gpu
    MIG = "mig"  # nvidia.com/mig-<profile>
    DRA = "dra"  # a ResourceClaim allocation


class GpuUse(Frozen):
    namespace: str
    pod: str
    container: str = ""
    gpu: int | None = None  # NVML index on the node; None: a GPU of the node, which unknown
    mig: str | None = None  # MIG device (UUID or "GPU-I:nn" instance) when via MIG
    via: GpuClaim


class NodeGpuUse(Frozen):
    node: str
    uses: list[GpuUse] = []
    known: bool = True  # False: could not be read (fail closed: treat every GPU as used)

    def on_gpu(self, gpu: int) -> list[GpuUse]:
        """The pods using that GPU; a use whose GPU is unknown counts on every GPU."""
        return [u for u in self.uses if u.gpu is None or u.gpu == gpu]

    def busy(self) -> bool:
        return bool(self.uses) or not self.known


class GpuUseSource(Protocol):
    def gpu_use(self, node: str) -> NodeGpuUse:
        """Which pods use the node's GPUs now."""
        ...
