"""GPU-scoped rungs: a drain, a job kill or a reset that acts on the faulty GPU only.

A rung with ``scope: gpu`` takes the trigger's GPU out of allocation (a per-GPU quarantine:
new pods do not land on it, the node stays schedulable) and evicts or kills only the pods
using that GPU or its MIG instances; the other GPUs' pods keep running. Node-level rungs
(reboot, replace) always take the whole node. The quarantine is lifted by the ladder's restore
once a rung verified the GPU healthy. Which actions may be GPU-scoped, and what each does so,
is a column of the action table (``ActionSpec.on_one_gpu``, remedy/core/actions.py).
"""

from __future__ import annotations

import re
from typing import Protocol

from remedy.acting.gpu_use import GpuUse, NodeGpuUse
from remedy.core.models import Frozen, Scope

__all__ = [
    "GpuRelease",
    "GpuReleased",
    "GpuScopedControl",
    "Scope",
    "mig_instance",
    "pods_on",
]

_GPU_INSTANCE = re.compile(r"GPU-I:(\d{1,6})")


def pods_on(use: NodeGpuUse, gpus: list[int], instance: int | None = None) -> list[GpuUse]:
    """The uses to evict for a fault on ``gpus`` (empty: the GPU is not known, so every one).
    A use whose GPU is unknown counts on every GPU, and so does a node whose use could not
    be read (fail closed): then the caller must take the node, not guess. ``instance``, the
    MIG GPU instance an Xid named, narrows it to that instance's pods where the GPU use says
    which instance each pod has; a use on those GPUs whose instance is not known stays in.

    >>> u = NodeGpuUse(node="n", uses=[
    ...     GpuUse(namespace="a", pod="p0", gpu=0, via="device_plugin"),
    ...     GpuUse(namespace="a", pod="p3", gpu=3, via="device_plugin")])
    >>> [x.pod for x in pods_on(u, [3])]
    ['p3']
    >>> m = NodeGpuUse(node="n", uses=[
    ...     GpuUse(namespace="a", pod="m1", gpu=3, mig="GPU-I:01", via="mig"),
    ...     GpuUse(namespace="a", pod="m2", gpu=3, mig="GPU-I:02", via="mig"),
    ...     GpuUse(namespace="a", pod="mx", gpu=3, mig="MIG-4f1c", via="mig")])
    >>> [x.pod for x in pods_on(m, [3], instance=2)]
    ['m2', 'mx']
    """
    if not gpus:
        return list(use.uses)
    on = [u for u in use.uses if u.gpu is None or u.gpu in gpus]
    if instance is None:
        return on
    return [u for u in on if mig_instance(u) in (None, instance)]


def mig_instance(use: GpuUse) -> int | None:
    """The MIG GPU instance a use names (``GPU-I:nn``, as the Xid lines spell it); None when
    it is not via MIG or names its MIG device another way (a UUID): not known."""
    found = _GPU_INSTANCE.fullmatch(use.mig or "")
    return int(found[1]) if found else None


class GpuRelease(Frozen):
    """A person lifts remedy's quarantine of one GPU (``remedy release-gpu``): the ladder that
    took it out ended without returning it (needs_human, aborted) and nothing else will."""

    node: str
    gpu: int
    by: str = ""
    note: str = ""
    identity: str = ""  # the caller's Temporal client identity


class GpuReleased(Frozen):
    node: str
    gpu: int
    lifted: bool = False  # False: remedy held no quarantine of that GPU
    held_by: str = ""  # the ladder that held it ("" when its record was gone)
    detail: str = ""


def check_gpu_index(node: str, gpu: int, gpus: int) -> None:
    """Raise ActionRefused for a GPU index the node does not have (``gpus``: how many it has;
    0: not known, nothing refused) — said as such, not as "no quarantine of it"."""
    from remedy.core.errors import ActionRefused

    if gpus and not 0 <= gpu < gpus:
        raise ActionRefused(f"{node} has {gpus} GPUs (0-{gpus - 1}): no GPU {gpu}")


class GpuScopedControl(Protocol):
    """The cluster side of a GPU-scoped rung. Each disruptive call carries its idempotency key
    (remedy/core/once.py): a retry after a lost answer finds it done and answers what it did."""

    def evict_gpu_pods(
        self,
        node: str,
        gpus: list[int],
        key: str,
        kill: bool,
        owner: str,
        instance: int | None = None,
    ) -> str:
        """Quarantine ``gpus`` (held by ``owner``, the ladder's workflow id), then evict (or,
        ``kill``, delete) the pods using them (``instance``: only that MIG instance's, see
        ``pods_on``); say what was done. ActionRefused when the node's GPU use cannot be
        read: a GPU-scoped rung never guesses which pods to spare."""
        ...

    def lift_quarantine(self, node: str, workflow_id: str) -> list[int]:
        """Return to allocation the GPUs that ladder quarantined; the GPUs lifted."""
        ...

    def release_gpu(self, node: str, gpu: int) -> GpuReleased:
        """Return one GPU to allocation whichever ladder quarantined it (a person's call);
        ``lifted`` False when remedy held no quarantine of it. Idempotent."""
        ...
