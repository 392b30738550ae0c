"""The demo's console: a handled event is one line, an error or a bug keeps its traceback."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from temporalio.exceptions import ApplicationError

from remedy.core.errors import ActionFailed, TransientError
from workers.demo_console import one_line_events
from workers.demo_run import stop_if_asked

ACTIVITY = {
    "activity_id": "3",
    "activity_type": "cordon",
    "attempt": 2,
    "namespace": "default",
    "task_queue": "remedy-controller",
    "workflow_id": "node-remediation/gpu-node-007",
    "workflow_run_id": "r1",
    "workflow_type": "NodeRemediation",
}


def _log(
    logger: str, level: int, message: str, error: BaseException | None = None, **extra: object
) -> None:
    """Log as a worker does: from inside the ``except`` that caught ``error``, if any."""
    if error is None:
        logging.getLogger(logger).log(level, message, extra=extra)
        return
    try:
        raise error
    except BaseException:
        logging.getLogger(logger).log(level, message, exc_info=True, extra=extra)


@contextmanager
def _console() -> Iterator[tuple[list[str], io.StringIO]]:
    """What the demo's console says (its lines) and what it writes to stderr."""
    said: list[str] = []
    stderr = io.StringIO()
    with one_line_events(said.append, stderr):
        yield said, stderr


def test_a_failed_activity_is_one_line_with_its_name_attempt_and_error() -> None:
    # What temporalio's activity worker logs for every activity that raised (WARNING, stack).
    failure = {"temporal_activity": ACTIVITY, "__temporal_error_identifier": "ActivityFailure"}
    wrapped = ApplicationError("GPU 2 is lost from the bus", type="ActionFailed")
    with _console() as (said, stderr):
        for error in (TransientError("the API server is down"), wrapped):
            _log(
                "temporalio.activity",
                logging.WARNING,
                "Completing activity as failed ({...})",
                error,
                **failure,
            )
    assert said == [
        "  warn   activity cordon failed (attempt 2, node-remediation/gpu-node-007): "
        "TransientError: the API server is down",
        "  warn   activity cordon failed (attempt 2, node-remediation/gpu-node-007): "
        "ActionFailed: GPU 2 is lost from the bus",
    ]
    assert stderr.getvalue() == ""


def test_a_warning_about_a_remedy_error_or_none_is_one_line() -> None:
    with _console() as (said, stderr):
        _log("adapters.kubernetes", logging.WARNING, "no event on n1", ActionFailed("forbidden"))
        _log("temporalio.workflow", logging.WARNING, "pool p: storm: disruptive work paused")
        _log("activities.cluster", logging.INFO, "cordon n1: cordoned")  # below the console
    assert said == [
        "  warn   no event on n1: ActionFailed: forbidden",
        "  warn   pool p: storm: disruptive work paused",
    ]
    assert stderr.getvalue() == ""


def test_errors_and_unexpected_exceptions_keep_their_traceback() -> None:
    with _console() as (said, stream):
        _log(
            "temporalio.activity",
            logging.WARNING,
            "Completing activity as failed",
            KeyError("gpu"),
            temporal_activity=ACTIVITY,
        )  # a bug in an activity
        _log(
            "temporalio.worker._workflow",
            logging.ERROR,
            "Failed handling activation",
            TransientError("even a remedy error"),
        )
    stderr = stream.getvalue()
    assert said == []
    assert stderr.count("Traceback (most recent call last)") == 2
    assert "WARNING temporalio.activity: Completing activity as failed" in stderr
    assert "KeyError: 'gpu'" in stderr
    assert "ERROR temporalio.worker._workflow: Failed handling activation" in stderr


def test_the_console_is_gone_after_the_demo() -> None:
    before = list(logging.getLogger().handlers)
    with _console() as (said, _):
        assert len(logging.getLogger().handlers) == len(before) + 2
    assert logging.getLogger().handlers == before
    logging.getLogger("x").warning("after the demo")
    assert said == []


async def test_a_ctrl_c_an_await_swallowed_still_stops_the_demo_at_its_next_fault() -> None:
    """asyncio.run cancels the demo's task once on Ctrl-C; an await that finished as the cancel
    came may swallow it (3.11's wait_for), and the demo ran on past the test's 60 s."""

    async def a_fault_then_the_check() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # Ctrl-C
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            pass  # swallowed
        stop_if_asked()
        return "ran on"

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(a_fault_then_the_check())


async def test_no_ctrl_c_no_stop() -> None:
    stop_if_asked()  # nothing asked: returns
