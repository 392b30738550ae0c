"""A cancelled synchronous activity gets an exception raised asynchronously in its thread;
one landing inside ``Thread.start`` lost the thread for good (a probe stuck in ``Thread.start``
under the stress run). The calls that may hang start their threads elsewhere."""

from __future__ import annotations

import ctypes
import threading
import time

import pytest

from adapters.sim import SimFleet
from remedy.core.threads import call_with_timeout
from tests.test_probe import probe


class Cancelled(Exception):
    """What Temporal raises in a cancelled activity's thread."""


def _starts_seen_from(run: object) -> set[str]:
    """Names of the threads that called ``Thread.start`` while ``run`` ran in a thread."""
    seen: set[str] = set()
    start = threading.Thread.start

    def recording(self: threading.Thread) -> None:
        seen.add(threading.current_thread().name)
        start(self)

    threading.Thread.start = recording  # type: ignore[method-assign]
    try:
        worker = threading.Thread(target=run, name="activity")  # type: ignore[arg-type]
        start(worker)
        worker.join(30)
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    return seen


def test_a_timed_call_never_starts_a_thread_from_the_callers_thread() -> None:
    seen = _starts_seen_from(lambda: call_with_timeout(lambda: 42, 5))
    assert "activity" not in seen and seen == {"thread-starter"}


def test_a_probe_never_starts_a_thread_from_the_activitys_thread() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=8, check_timeout_s=2)
    seen = _starts_seen_from(lambda: probe(fleet))
    assert seen and "activity" not in seen


def test_a_cancellation_raised_while_waiting_ends_the_call_and_loses_no_thread() -> None:
    ended: list[BaseException] = []

    def activity() -> None:
        try:
            call_with_timeout(lambda: time.sleep(0.3), 10)
        except Cancelled as exc:
            ended.append(exc)

    worker = threading.Thread(target=activity, name="activity")
    worker.start()
    time.sleep(0.05)  # it waits on the call's event now (a bound, not a timing)
    assert worker.ident is not None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(worker.ident), ctypes.py_object(Cancelled)
    )
    worker.join(10)
    assert not worker.is_alive() and len(ended) == 1
    assert call_with_timeout(lambda: "still starts threads", 5) == "still starts threads"


def test_a_call_that_hangs_is_abandoned_with_a_timeout() -> None:
    gate = threading.Event()
    with pytest.raises(TimeoutError, match=r"no answer within 0.05s"):
        call_with_timeout(gate.wait, 0.05)
    gate.set()
