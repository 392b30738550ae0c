"""Which pod uses which GPU, as the kubelet tells it: its pod-resources API lists, per pod and
container, the devices the device plugins gave it (``nvidia.com/gpu``: GPU UUIDs;
``nvidia.com/mig-*``: MIG device UUIDs) and the DRA claims' devices. The agent reads it
(adapters/host/pod_resources.py) and publishes the ``NodeGpuUse`` made here, which the
controller reads for GPU-scoped rungs and every "is this node busy" question.

Fails closed: a device id that maps to no GPU of the node counts on every GPU (``gpu=None``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol

from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse
from remedy.core.models import Frozen

KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
DRA_GPU_DRIVER = "gpu.nvidia.com"
log = logging.getLogger(__name__)
_DRA_GPU = re.compile(r"gpu-(\d+)(?:\b|-)")  # the NVIDIA DRA driver's gpu-<index>[-mig-...]


class ClaimDevice(Frozen):
    """One device of a DRA claim allocated to the container."""

    driver: str = ""
    pool: str = ""
    device: str = ""


class ContainerDevices(Frozen):
    """One container's devices: by resource name (device plugins) and its DRA claims'."""

    namespace: str
    pod: str
    container: str = ""
    devices: dict[str, list[str]] = {}  # resource name → device ids
    claimed: list[ClaimDevice] = []


class PodResourcesSource(Protocol):
    """The kubelet's pod-resources API on the node (``v1.PodResourcesLister/List``)."""

    def list(self) -> list[ContainerDevices]: ...


def gpu_use_from(node: str, containers: list[ContainerDevices], ids: dict[str, int]) -> NodeGpuUse:
    """The node's GPU use; ``ids`` maps GPU and MIG device UUIDs to their GPU's NVML index.

    >>> c = ContainerDevices(namespace="a", pod="p", devices={"nvidia.com/gpu": ["GPU-7"]})
    >>> [u.gpu for u in gpu_use_from("n", [c], {"GPU-7": 3}).uses]
    [3]
    >>> [u.gpu for u in gpu_use_from("n", [c], {}).uses]  # unknown: every GPU
    [None]
    """
    return NodeGpuUse(
        node=node,
        uses=[
            GpuUse(
                namespace=c.namespace, pod=c.pod, container=c.container, gpu=gpu, mig=mig, via=via
            )
            for c in containers
            for gpu, via, mig in _gpus_of(c, ids)
        ],
    )


def _gpus_of(
    c: ContainerDevices, ids: dict[str, int]
) -> list[tuple[int | None, GpuClaim, str | None]]:
    found: list[tuple[int | None, GpuClaim, str | None]] = []
    for resource, device_ids in c.devices.items():
        mig = resource.startswith(MIG_RESOURCE_PREFIX)
        if resource != GPU_RESOURCE and not mig:
            continue  # NICs, hugepages: not a GPU
        via = GpuClaim.MIG if mig else GpuClaim.DEVICE_PLUGIN
        found += [(_index(d, ids), via, d if mig else None) for d in device_ids]
    for claimed in c.claimed:
        if claimed.driver == DRA_GPU_DRIVER:
            index = _DRA_GPU.match(claimed.device)
            found.append((int(index.group(1)) if index else None, GpuClaim.DRA, None))
    return found


def _index(device: str, ids: dict[str, int]) -> int | None:
    """A device plugin's id: a UUID, a time-sliced replica ``UUID::n``, or (deviceIDStrategy
    index) the index itself (``3``, a MIG device ``3:1``)."""
    base = device.split("::", 1)[0]
    if base in ids:
        return ids[base]
    index = base.split(":", 1)[0]
    return int(index) if index.isdigit() else None


class GpuUsePublisher(Protocol):
    """Where the agent puts its node's GPU use for the controller (Kubernetes: the node
    annotation ``remedy.io/gpu-use``)."""

    def publish_gpu_use(self, node: str, use: NodeGpuUse) -> None: ...


class GpuUseReporter:
    """The agent's round: read the kubelet's pod resources, map device ids to GPUs, publish
    when it changed. A read that fails publishes ``known=False``, never the last good one: a
    stale "idle" could let an active check load-test a GPU that serves."""

    def __init__(
        self,
        node: str,
        source: PodResourcesSource,
        ids: Callable[[], dict[str, int]],
        publisher: GpuUsePublisher,
    ) -> None:
        self._node, self._source, self._ids, self._publisher = node, source, ids, publisher
        self._published: NodeGpuUse | None = None

    def report(self) -> NodeGpuUse:
        try:
            use = gpu_use_from(self._node, self._source.list(), self._ids())
        except Exception as exc:  # noqa: BLE001 - any failure to read is "not known"
            log.warning("GPU use of %s not readable: %s", self._node, exc)
            use = NodeGpuUse(node=self._node, known=False)
        if use != self._published:
            self._publisher.publish_gpu_use(self._node, use)
            self._published = use
        return use
