"""A node-level rung with no node drain before it (remedy.actions.needs_the_node_drained): the
ladder drains the node first, unless the rung says ``if_not_drained: force``, which
``remedy runbooks validate`` warns about (remedy/runbook/lint.py)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from remedy.actions import cleared_by, needs_the_node_drained
from remedy.models import Action, Scope

if TYPE_CHECKING:
    from remedy.runbook.schema import Rung


class IfNotDrained(StrEnum):
    """What a reboot, a replace or a reset_gpu at node scope does when no node drain came
    before it (a GPU-scoped drain leaves the other GPUs' pods on the node)."""

    DRAIN = "drain"  # cordon and drain the node first (the default)
    FORCE = "force"  # run it on the node as it is: its pods go down with it


def node_level_only(value: IfNotDrained, rung: dict[str, Any], authoring: bool) -> IfNotDrained:
    """Written on a rung that never drains first, it would do nothing: an error (only in what
    a person wrote; a runbook in a message from a newer remedy is taken as it is)."""
    action, scope = rung.get("action"), rung.get("scope", Scope.NODE)
    if authoring and action is not None and not needs_the_node_drained(action, scope):
        raise ValueError(
            "if_not_drained is for the node-level rungs that need the node drained "
            "(reboot, replace, reset_gpu at node scope)"
        )
    return value


def clearing_rung(ladder: Sequence[Rung], at: int) -> int | None:
    """The first rung before ``at`` that leaves the node clear for it: a drain at node scope
    (for a reset, a killed job too), or a node-level rung that drains first. None: none."""
    clears = cleared_by(ladder[at].action)
    return next(
        (
            i
            for i, r in enumerate(ladder[:at])
            if (r.action in clears and r.scope is Scope.NODE) or drains_first(ladder, i)
        ),
        None,
    )


def drains_first(ladder: Sequence[Rung], at: int) -> bool:
    """Whether the ladder drains the node before rung ``at`` (as written: a rung that clears
    the node but was skipped or failed is the workflow's to judge)."""
    rung = ladder[at]
    return (
        needs_the_node_drained(rung.action, rung.scope)
        and rung.if_not_drained is IfNotDrained.DRAIN
        and clearing_rung(ladder, at) is None
    )


def drain_like(ladder: Sequence[Rung]) -> Rung | None:
    """The drain run first: the ladder's own drain rung (its timeout and retries) at node
    scope; None: it has none, and a drain with the defaults runs."""
    own = next((r for r in ladder if r.action is Action.DRAIN), None)
    return own.model_copy(update={"scope": Scope.NODE}) if own is not None else None
