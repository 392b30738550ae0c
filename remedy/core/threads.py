"""Daemon threads for calls that may hang (NVML, CUDA, a kernel-log read), started so that a
cancelled activity cannot break them.

Temporal cancels a synchronous activity by raising an exception asynchronously in its thread.
Landing inside ``threading.Thread.start()``, that exception leaves the new thread half-started:
``start`` fails with a ``KeyError`` from ``threading._limbo``, or waits forever for a thread that
will never say it started — the activity's thread, and its executor slot, are then lost for
good (seen under load: a cancelled probe stuck in ``Thread.start``). So the activity's thread
never starts a thread itself: it hands the call to one long-lived starter thread, which no
activity cancellation reaches, and waits on an event, where a cancellation lands cleanly.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_to_start: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()


def _starter() -> None:
    while True:
        target, name = _to_start.get()
        threading.Thread(target=target, daemon=True, name=name).start()


# Started on import (a worker imports its activities' modules before it runs any of them).
threading.Thread(target=_starter, daemon=True, name="thread-starter").start()


def spawn(fn: Callable[[], object], name: str) -> threading.Event:
    """Run ``fn`` in a new daemon thread; the event is set once it has returned or raised."""
    done = threading.Event()

    def target() -> None:
        try:
            fn()
        finally:
            done.set()

    _to_start.put((target, name))
    return done


def call_with_timeout(fn: Callable[[], T], timeout_s: float, what: str = "no answer") -> T:
    """``fn()`` in a daemon thread, given ``timeout_s``. A hung NVML or CUDA call cannot be
    interrupted, so on timeout the thread is abandoned; being a daemon, it never blocks the
    process from exiting. ``TimeoutError("{what} within …s")`` when it does not answer."""
    outcome: list[tuple[bool, Any]] = []

    def call() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))

    if not spawn(call, "timed-call").wait(timeout_s):
        raise TimeoutError(f"{what} within {timeout_s:g}s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
