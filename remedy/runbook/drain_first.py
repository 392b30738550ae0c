"""Where a ladder drains the node first: the rung before a node-level one that leaves the node
clear, and the drain run first where none does (remedy/runbook/undrained.py)."""

from __future__ import annotations

from collections.abc import Sequence

from remedy.core.actions import cleared_by, needs_the_node_drained
from remedy.core.models import Action, Scope
from remedy.runbook.schema import Rung
from remedy.runbook.undrained import IfNotDrained


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
