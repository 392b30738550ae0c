"""The table of actions: everything remedy knows about each thing it can do to a node.

The workflow, the runbook schema, ``remedy runbooks explain``, the contract between workflows
and activities, and docs/runbooks.md all read this table; adding an action is one entry here
and one activity (docs/architecture.md, "Add an action").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from remedy.models import Action, Scope


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
    ),
    Action.KILL_JOB: ActionSpec(
        Where.CLUSTER,
        disruptive=True,
        hardware=False,
        verifies=True,
        does="stop the job's pods on the node (its controller reschedules them)",
        lasting=True,
    ),
    Action.RESET_GPU: ActionSpec(
        Where.NODE,
        disruptive=True,
        hardware=True,
        verifies=True,
        does="reset the faulty GPUs (the cluster's GPU pods step aside meanwhile)",
        needs_drained=True,
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
    Action.RESTORE: ActionSpec(
        Where.CLUSTER,
        disruptive=False,
        hardware=False,
        verifies=False,
        does="undo remedy's cordon once a rung verified the node healthy",
        rung=False,
    ),
}


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
    """The table as docs/runbooks.md shows it (a test keeps the two the same)."""
    rows = [
        "| action | runs | disruptive | hardware | verified by default | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for action, s in ACTIONS.items():
        if s.rung:
            rows.append(
                f"| `{action.value}` | {'on the node' if s.where is Where.NODE else 'cluster'} "
                f"| {_yes(s.disruptive)} | {_yes(s.hardware)} | {_yes(s.verifies)} | {s.does} |"
            )
    return "\n".join(rows)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
