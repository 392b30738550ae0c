"""A node-level rung with no node drain before it (remedy.core.actions.needs_the_node_drained):
the
ladder drains the node first, unless the rung says ``if_not_drained: force``, which
``remedy runbooks validate`` warns about (remedy/runbook/lint.py)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from remedy.core.actions import needs_the_node_drained
from remedy.core.models import Scope


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
