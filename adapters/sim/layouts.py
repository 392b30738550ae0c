"""What runs on a simulated node's GPUs, beyond the default (one training job over the whole
node): the shared nodes GPU-scoped remediation is for, and who uses which GPU on them."""

from __future__ import annotations

from collections.abc import Callable

from adapters.sim.node import SimNode, SimPod
from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse

NAMESPACE = "jobs"
MIG_PER_GPU = 2  # instances of each MIG GPU used (e.g. two 3g.71gb on an H200)


def training(node: SimNode) -> list[SimPod]:
    """One job on every GPU of the node (the default)."""
    return [SimPod(f"train-{node.name}", uses_gpus=True)]


def shared(node: SimNode) -> list[SimPod]:
    """An inference node: one one-GPU pod on each GPU, through the device plugin."""
    return [
        SimPod(f"infer-{node.name}-{g.index}", uses_gpus=True, gpus=(g.index,)) for g in node.gpus
    ]


def mig(node: SimNode) -> list[SimPod]:
    """Every GPU split into MIG instances, one pod on each (``nvidia.com/mig-*``)."""
    return [
        SimPod(
            f"mig-{node.name}-{g.index}-{i}",
            uses_gpus=True,
            gpus=(g.index,),
            via=GpuClaim.MIG,
            mig=f"GPU-I:{g.index * MIG_PER_GPU + i:02d}",
        )
        for g in node.gpus
        for i in range(MIG_PER_GPU)
    ]


def dra(node: SimNode) -> list[SimPod]:
    """One pod per GPU, each given its GPU by a DRA ResourceClaim."""
    return [
        SimPod(f"claim-{node.name}-{g.index}", uses_gpus=True, gpus=(g.index,), via=GpuClaim.DRA)
        for g in node.gpus
    ]


LAYOUTS: dict[str, Callable[[SimNode], list[SimPod]]] = {
    "training": training,
    "shared": shared,
    "mig": mig,
    "dra": dra,
}


def gpu_use(node: SimNode) -> NodeGpuUse:
    """The node's uses as the cluster would report them (the twin knows each pod's GPUs)."""
    uses = [
        GpuUse(namespace=NAMESPACE, pod=p.name, gpu=gpu, mig=p.mig, via=p.via)
        for p in node.pods
        if p.uses_gpus
        for gpu in (p.gpus or (None,))
    ]
    return NodeGpuUse(node=node.name, uses=uses)
