"""The ladder's actions registered from the action table (``remedy.core.actions.ACTIONS``), not
from
a list kept by hand: a row whose activity is missing fails when its worker is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remedy.core.actions import ACTIONS, Where


def action_activities(where: Where, *implementations: object) -> list[Callable[..., Any]]:
    """The activity of every action the table runs ``where``: the method named as the action
    (``Action.REBOOT`` → ``reboot``) on the first of ``implementations`` that has one."""
    found: list[Callable[..., Any]] = []
    for action, spec in ACTIONS.items():
        if spec.where is not where:
            continue
        method = next(
            (getattr(i, action.value) for i in implementations if hasattr(i, action.value)), None
        )
        if method is None:
            raise TypeError(
                f"the action table runs {action.value} {where.value}-side but no activity "
                f"implements it: add a method {action.value} (docs/architecture.md, An action)"
            )
        found.append(method)
    return found
