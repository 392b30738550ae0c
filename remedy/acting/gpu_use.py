"""Which pod uses which GPU of a node: the unit a GPU-scoped rung acts on, and what every
"is this node busy" question asks. Read by the cluster adapters (pod specs' ``nvidia.com/gpu``
and ``nvidia.com/mig-*`` resources, DRA ResourceClaim allocations) and by the sim fleet.

Fails closed: a node whose use could not be read (``known=False``) counts as using every GPU,
and a use whose GPU index is unknown counts on every GPU of the node."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from remedy.core.models import Frozen


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
        """The uses of that GPU; a use of an unknown GPU counts on every GPU."""
        return [use for use in self.uses if use.gpu is None or use.gpu == gpu]

    def busy(self) -> bool:
        """Any use, or not known."""
        return bool(self.uses) or not self.known


class GpuUseSource(Protocol):
    """The cluster adapters' seam: who uses the node's GPUs now."""

    def gpu_use(self, node: str) -> NodeGpuUse: ...
