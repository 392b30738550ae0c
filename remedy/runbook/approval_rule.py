"""`approval: required` only where there is something to approve: a rung that takes work away
from the node. On a diagnose or a cordon it was accepted and then ignored by the ladder."""

from __future__ import annotations

from typing import Any

from remedy.core.actions import ACTIONS

_DISRUPTIVE = ", ".join(a.value for a, spec in ACTIONS.items() if spec.disruptive and spec.rung)


def approval_fits(required: bool, rung: dict[str, Any], authoring: bool) -> None:
    """Refuse ``approval: required`` on a rung whose action is not disruptive (only in what a
    person wrote; a rung whose action was refused is left to that error)."""
    action = ACTIONS[rung["action"]] if "action" in rung else None
    if authoring and required and action is not None and not action.disruptive:
        why = f"takes work away from the node ({_DISRUPTIVE}); {rung['action']} needs none"
        raise ValueError(f"approval: required is for a rung that {why}")
