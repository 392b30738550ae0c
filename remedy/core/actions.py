"""The table of actions: everything remedy knows about each thing it can do to a node.

The workflow, the runbook schema, ``remedy runbooks explain``, the contract between workflows
and activities, the workers that register the activities, and docs/runbooks.md all read this
table; adding an action is its member and its row here, its activity, and what it clears in
the simulation (docs/architecture.md, "An action"). Nothing here imports the rest of remedy:
``remedy.core.models`` takes ``Action`` and ``Scope`` from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    """What remedy can do to a node, from the least to the most disruptive (its row in
    ``ACTIONS`` says the rest)."""

    DIAGNOSE = "diagnose"
    CORDON = "cordon"
    DRAIN = "drain"
    KILL_JOB = "kill_job"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    REPLACE = "replace"
    RESTART_FABRIC_MANAGER = "restart_fabric_manager"
    RESTORE = "restore"  # undo what remedy did to a node that recovered


class Scope(StrEnum):
    """What a rung acts on (remedy/acting/gpu_scope.py)."""

    NODE = "node"  # the whole node (the default)
    GPU = "gpu"  # the faulty GPU only: its pods, its MIG instances, its allocation


class Where(StrEnum):
    NODE = "node"  # on the node itself, by its agent (a dead node never picks it up)
    CLUSTER = "cluster"  # through the cluster's API, by the controller


@dataclass(frozen=True)
class ActionSpec:
    where: Where
    disruptive: bool  # takes work away from the node: holds a disruption lease of its pool
    hardware: bool  # acts on the machine: never for a fault the application caused
    verifies: bool  # re-probed after the rung by default (a runbook's `verify` overrides)
    does: str  # one line for `remedy runbooks explain` and docs/runbooks.md
    rung: bool = True  # may be a rung of a ladder (restore is remedy's own last step)
    reports_progress: bool = False  # a long action that says how far it got (it heartbeats)
    # Needs the node's pods gone first: after a failed drain it runs only as the rung's
    # `if_drain_failed` says (a reset with the job's pods on the GPU, a reboot under them).
    needs_drained: bool = False
    # Its effect stays until remedy restores the node: a ladder that switches runbooks does
    # not do it again (the pods a drain evicted stay evicted while the node is cordoned).
    lasting: bool = False
    # What it does as a GPU-scoped rung (``scope: gpu``, remedy/acting/gpu_scope.py), for `remedy
    # runbooks explain`; empty: it acts on the whole node by nature and may not be GPU-scoped.
    on_one_gpu: str = ""

    @property
    def gpu_scoped(self) -> bool:
        """It may be a GPU-scoped rung."""
        return bool(self.on_one_gpu)


ACTIONS: dict[Action, ActionSpec] = {
    Action.DIAGNOSE: ActionSpec(
        Where.NODE,
        disruptive=False,
        hardware=False,
        verifies=True,
        does="run the deep diagnose on the node (a load test on every GPU)",
    ),
    Action.CORDON: ActionSpec(
        Where.CLUSTER,
        disruptive=False,
        hardware=False,
        verifies=False,
        does="cordon the node: no new pods land on it; running pods keep running",
        lasting=True,
    ),
    Action.DRAIN: ActionSpec(
        Where.CLUSTER,
        disruptive=True,
        hardware=False,
        verifies=False,
        does="drain the node: evict its pods (training pods get their checkpoint grace)",
        reports_progress=True,
        lasting=True,
        on_one_gpu=(
            "quarantine the faulty GPU (no new pods on it; the node stays schedulable) and "
            "evict only the pods using it or its MIG instances (only the MIG instance an Xid "
            "names, where the node says which pods use it)"
        ),
    ),
    Action.KILL_JOB: ActionSpec(
        Where.CLUSTER,
        disruptive=True,
        hardware=False,
        verifies=True,
        does="stop the job's pods on the node (its controller reschedules them)",
        lasting=True,
        on_one_gpu="quarantine the faulty GPU and stop only the pods using it or its MIG instances",
    ),
    Action.RESET_GPU: ActionSpec(
        Where.NODE,
        disruptive=True,
        hardware=True,
        verifies=True,
        does="reset the faulty GPUs (the cluster's GPU pods step aside meanwhile)",
        needs_drained=True,
        on_one_gpu=(
            "reset the faulty GPU once its pods and MIG instances are idle, then restore its "
            "MIG layout; it returns to allocation when verified"
        ),
    ),
    Action.REBOOT: ActionSpec(
        Where.NODE,
        disruptive=True,
        hardware=True,
        verifies=True,
        does="reboot the node and wait for a new boot id and Ready",
        needs_drained=True,
    ),
    Action.REPLACE: ActionSpec(
        Where.CLUSTER,
        disruptive=True,
        hardware=True,
        verifies=False,
        does="replace the node (a new machine; this one is deleted)",
        needs_drained=True,
    ),
    # Fabric Manager's exit aborts the node's CUDA jobs (ABORT_CUDA_JOBS_ON_FM_EXIT=1, its
    # default): it stops every GPU's work on this node, so it takes a disruption lease and the
    # node's pods go first; other nodes' NVLink is their own (one NVSwitch baseboard per node).
    Action.RESTART_FABRIC_MANAGER: ActionSpec(
        Where.NODE,
        disruptive=True,
        hardware=True,
        verifies=True,
        does="restart NVIDIA Fabric Manager (nvidia-fabricmanager), which NVSwitch systems "
        "need for NVLink; it aborts the node's CUDA jobs",
        needs_drained=True,
    ),
    Action.RESTORE: ActionSpec(
        Where.CLUSTER,
        disruptive=False,
        hardware=False,
        verifies=False,
        does="undo remedy's cordon once a rung verified the node healthy",
        rung=False,
    ),
}


# The rungs that may be GPU-scoped; the others act on the node by nature.
GPU_SCOPED = tuple(action for action, spec in ACTIONS.items() if spec.gpu_scoped)


def needs_the_node_drained(action: Action, scope: Scope) -> bool:
    """A node-level rung that needs the node's pods gone (a reboot, a replacement, a reset at
    node scope): with nothing at node scope before it that clears the node for it
    (``cleared_by``), the ladder drains the node first (a drain of one GPU leaves the other
    GPUs' pods on the node), unless its ``if_not_drained`` forces it."""
    return ACTIONS[action].needs_drained and scope is Scope.NODE


def cleared_by(action: Action) -> tuple[Action, ...]:
    """What, done at node scope before ``action``, leaves the node clear for it: a reset needs
    the GPUs free (a drain, or the pods holding them killed); a reboot or a replacement needs
    every pod gone (a drain)."""
    return (Action.DRAIN, Action.KILL_JOB) if action is Action.RESET_GPU else (Action.DRAIN,)


def actions_markdown() -> str:
    """The table as docs/runbooks.md shows it (tests/generated_docs.py writes it there)."""
    rows = [
        "| action | runs | disruptive | hardware | verified by default | `scope: gpu` "
        "| what it does |",
        "|---|---|---|---|---|---|---|",
    ]
    for action, s in ACTIONS.items():
        if s.rung:
            rows.append(
                f"| `{action.value}` | {'on the node' if s.where is Where.NODE else 'cluster'} "
                f"| {_yes(s.disruptive)} | {_yes(s.hardware)} | {_yes(s.verifies)} "
                f"| {_yes(s.gpu_scoped)} | {s.does} |"
            )
    return "\n".join(rows)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
