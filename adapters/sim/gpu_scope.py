"""GPU-scoped actions over the twin: which pod uses which GPU (a minimal GpuUseSource over the
sim's own pods, until the gpumap side's shared and MIG nodes land), the per-GPU quarantine and
the eviction of only the pods on the faulty GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from adapters.sim import layouts
from adapters.sim.state import SimState, atomic
from remedy.acting.gpu_scope import GpuReleased, check_gpu_index, pods_on
from remedy.acting.gpu_use import NodeGpuUse
from remedy.core.errors import ActionRefused
from remedy.core.models import Action
from remedy.core.once import once

if TYPE_CHECKING:
    from adapters.sim.node import SimNode


def node_gpu_use(sim: SimNode) -> NodeGpuUse:
    return layouts.gpu_use(sim)


class SimGpuScope:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def gpu_use(self, node: str) -> NodeGpuUse:
        with self._fleet.lock:
            return node_gpu_use(self._fleet.node(node))

    def evict_gpu_pods(
        self,
        node: str,
        gpus: list[int],
        key: str,
        kill: bool,
        owner: str,
        instance: int | None = None,
    ) -> str:
        action = Action.KILL_JOB if kill else Action.DRAIN

        def evict() -> str:
            if not gpus:
                raise ActionRefused("a GPU-scoped rung needs the faulty GPU's index")
            for g in gpus:
                sim.quarantined.setdefault(g, owner)
            gone = {u.pod for u in pods_on(node_gpu_use(sim), gpus, instance)}
            sim.pods = [p for p in sim.pods if p.name not in gone]
            if kill:
                sim.clear(Action.KILL_JOB)  # a hung job's hang goes with it
            self._fleet.record(node, action.value, key)
            verb = "deleted" if kill else "evicted"
            on = ", ".join(map(str, gpus))
            if instance is not None:
                on += f" (MIG GPU-I:{instance:02d})"
            return f"GPU {on} quarantined; {verb} {len(gone)} pods using it: {sorted(gone)}"

        self._fleet.pause_point(action.value)
        with self._fleet.lock:
            sim = self._fleet.act(node, action.value)
            done = once(
                sim, key, action, self._fleet.clock, evict, atomic, raised_means_failed=True
            )
            return self._fleet.answer(action.value, done)

    def lift_quarantine(self, node: str, workflow_id: str) -> list[int]:
        mine = self._lift(
            node, "restore", lambda held: [g for g, by in held.items() if by == workflow_id]
        )
        return sorted(mine)

    def release_gpu(self, node: str, gpu: int) -> GpuReleased:
        check_gpu_index(node, gpu, len(self._fleet.node(node).gpus))
        lifted = self._lift(node, "release_gpu", lambda held: [gpu])
        if gpu not in lifted:
            return GpuReleased(node=node, gpu=gpu, detail=f"GPU {gpu} is not quarantined")
        return GpuReleased(
            node=node, gpu=gpu, lifted=True, held_by=lifted[gpu], detail=f"GPU {gpu} returned"
        )

    def _lift(
        self, node: str, action: str, pick: Callable[[dict[int, str]], list[int]]
    ) -> dict[int, str]:
        """Take the picked GPUs out of the node's quarantine; the ones lifted and their holder."""
        with self._fleet.lock:
            sim = self._fleet.act(node, action)
            held = sim.quarantined
            return {g: held.pop(g) for g in pick(dict(held)) if g in held}
