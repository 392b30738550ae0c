"""Whether a workflow task may start another activity: told to stop (an operator's abort or
clear), it starts none, and an answer that came after the stop drives no next step; while an
abort is being judged, it waits first.

Set once at the top of a task (``stop_when``); the task's children inherit it (contextvars),
and ``ActivityDef.execute`` asks it before and after each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import Context, ContextVar, copy_context
from typing import Any


def _never() -> bool:
    return False


async def _go() -> None:
    return None


_STOPPED: ContextVar[Callable[[], bool]] = ContextVar("remedy_stopped", default=_never)
_FIRST: ContextVar[Callable[[], Awaitable[None]]] = ContextVar("remedy_first", default=_go)


def stop_when(stopped: Callable[[], bool], first: Callable[[], Awaitable[None]] = _go) -> None:
    """From now on, in this asyncio task of a workflow, an activity call raises
    ``asyncio.CancelledError`` instead of starting while ``stopped()`` — and instead of
    returning, when the activity finished after the stop: a stopped ladder never takes a step
    it did not already begin. Each call awaits ``first()`` before it asks (an abort being
    judged may stop it). Calls that give back (``gives_back=True``) are let through."""
    _STOPPED.set(stopped)
    _FIRST.set(first)


def unstoppable() -> Context:
    """The context of a task whose calls no stop cancels or holds (the read of the keys an
    abort is judged with)."""
    context = copy_context()
    context.run(_STOPPED.set, _never)
    context.run(_FIRST.set, _go)
    return context


async def may_start(name: str, gives_back: bool) -> Callable[[], bool]:
    """Raise if stopped (after ``first``); returns the ``stopped`` test to ask again when the
    call returns."""
    if gives_back:
        return _never
    await _FIRST.get()()
    stopped = _STOPPED.get()
    if stopped():
        raise asyncio.CancelledError(f"{name} not started: the workflow was stopped")
    return stopped


class FinishedAfterStop(asyncio.CancelledError):
    """An activity that finished after its workflow was told to stop: cancelled all the same
    (its answer drives no next step), carrying the answer for the record of what it did."""

    def __init__(self, name: str, result: Any) -> None:
        super().__init__(f"{name} finished after the workflow was stopped")
        self.result = result
