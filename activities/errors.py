"""Map remedy's exception hierarchy onto Temporal: permanent errors are non-retryable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.exceptions import ApplicationError

from remedy.errors import RemedyError


@contextmanager
def temporal_errors() -> Iterator[None]:
    try:
        yield
    except RemedyError as exc:
        raise ApplicationError(
            str(exc), type=type(exc).__name__, non_retryable=exc.permanent
        ) from exc
