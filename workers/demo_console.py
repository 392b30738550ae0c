"""The demo's console: one line for each event remedy expects and handles, the whole traceback
for anything else.

Handled: a warning whose exception, if any, is one remedy raises on purpose (its error hierarchy)
or a Temporal failure (an ``ApplicationError``, a cancellation, a timeout). The Temporal worker
logs every failed activity at WARNING with its stack ("Completing activity as failed"); the ladder
retries or escalates it, so the demo says, on its own console,
``warn   activity NAME failed (attempt N, WORKFLOW ID): TYPE: MESSAGE``, e.g. ``activity reset_gpu
failed (attempt 1, node-remediation/gpu-node-000): ActionFailed: GPU 2 is lost from the bus``.

Not handled, and kept whole on stderr: any ERROR (a workflow task that failed, a worker that
stopped), and a warning about an exception nobody raises on purpose (a ``KeyError`` in an
activity is a bug, however the ladder copes with it)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from temporalio.exceptions import ApplicationError, FailureError

from remedy.core.errors import RemedyError

EXPECTED: tuple[type[BaseException], ...] = (RemedyError, FailureError, asyncio.CancelledError)
TAG = "  warn   "  # in the column of the demo's own lines ("  fault  ", "  job    ")


def handled(record: logging.LogRecord) -> bool:
    """A warning about an event remedy expects (one line), not an error or a bug (traceback)."""
    if record.levelno >= logging.ERROR:
        return False
    error = record.exc_info[1] if record.exc_info else None
    return error is None or isinstance(error, EXPECTED)


def one_line(record: logging.LogRecord) -> str:
    """The event in one line: what happened, then the error's type and message, no stack."""
    activity = getattr(record, "temporal_activity", None)
    if getattr(record, "__temporal_error_identifier", None) == "ActivityFailure" and activity:
        what = (
            f"activity {activity['activity_type']} failed (attempt {activity['attempt']}, "
            f"{activity['workflow_id']})"
        )
    else:
        what = record.getMessage()
    error = record.exc_info[1] if record.exc_info else None
    return f"{TAG}{what}: {describe(error)}" if error is not None else f"{TAG}{what}"


def describe(error: BaseException) -> str:
    """``Type: message``; for a Temporal failure, the type it carries (remedy's error class)."""
    if isinstance(error, ApplicationError) and error.type:
        return f"{error.type}: {error.message}"
    if isinstance(error, FailureError):
        return f"{type(error).__name__}: {error.message}"
    return f"{type(error).__name__}: {error}"


class _Echo(logging.Handler):
    def __init__(self, echo: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self._echo = echo

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._echo(one_line(record))
        except Exception:
            self.handleError(record)


@contextmanager
def one_line_events(echo: Callable[[str], None], stream: TextIO | None = None) -> Iterator[None]:
    """While inside: handled events go to ``echo`` as one line each, anything else to
    ``stream`` (stderr) with its traceback. Replaces Python's last-resort handler, which
    printed both with their stacks."""
    said = _Echo(echo)
    said.addFilter(handled)
    crashes = logging.StreamHandler(stream or sys.stderr)
    crashes.setLevel(logging.WARNING)
    crashes.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    crashes.addFilter(lambda record: not handled(record))
    root = logging.getLogger()
    root.addHandler(said)
    root.addHandler(crashes)
    try:
        yield
    finally:
        root.removeHandler(said)
        root.removeHandler(crashes)
