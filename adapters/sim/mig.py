"""The twin's MIG layouts: a node's ``nvidia.com/mig.config`` and the MIG manager's state, the
instances a reset or a reboot destroys, and the MIG manager creating them again when it starts
(after a reboot, or when the GPU operator's pods return after a reset)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.sim.layouts import MIG_PER_GPU
from adapters.sim.state import SimState
from remedy.acting.mig_layout import MigLayout, MigState

if TYPE_CHECKING:
    from adapters.sim.node import SimNode

LAYOUT = "all-3g.71gb"  # two instances of each H200


def make_mig_node(sim: SimNode, config: str = LAYOUT) -> None:
    """Every GPU of the node in MIG mode with the layout's instances, applied."""
    sim.mig_config, sim.mig_state = config, MigState.SUCCESS.value
    for gpu in sim.gpus:
        gpu.mig, gpu.mig_instances = True, list(range(1, MIG_PER_GPU + 1))


def destroy_instances(sim: SimNode, gpus: list[int]) -> None:
    """A reset of those GPUs (or a reboot, of all): their MIG instances are gone."""
    for gpu in sim.gpus:
        if gpu.mig and gpu.index in gpus:
            gpu.mig_instances = []


def mig_manager_starts(sim: SimNode) -> None:
    """The MIG manager applies the node's layout, or reports that it failed."""
    if not layout_of(sim).has_instances:
        return
    if sim.mig_manager_fails:
        sim.mig_state = MigState.FAILED.value
        return
    for gpu in sim.gpus:
        if gpu.mig and not gpu.mig_instances:
            gpu.mig_instances = list(range(1, MIG_PER_GPU + 1))
    sim.mig_state = MigState.SUCCESS.value


def layout_of(sim: SimNode) -> MigLayout:
    return MigLayout(config=sim.mig_config, state=sim.mig_state)


class SimMigLayouts:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def ask_layout(self, node: str) -> MigLayout:
        with self._fleet.lock:
            sim = self._fleet.act(node, "ask_mig_layout")
            before = layout_of(sim)
            if before.has_instances:
                sim.mig_state = MigState.PENDING.value
            return before

    def layout(self, node: str) -> MigLayout:
        with self._fleet.lock:
            return layout_of(self._fleet.node(node))

    def keep_layout(self, node: str, before: MigLayout) -> None:
        with self._fleet.lock:
            sim = self._fleet.act(node, "keep_mig_layout")
            if sim.mig_config == before.config and sim.mig_state == MigState.PENDING:
                sim.mig_state = before.state
