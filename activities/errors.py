"""Map remedy's exception hierarchy onto Temporal: permanent errors are non-retryable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from remedy.core.errors import RemedyError, Throttled


@contextmanager
def temporal_errors() -> Iterator[None]:
    try:
        yield
    except RemedyError as exc:
        # A throttled call is retried when the API server said, not on the policy's backoff.
        after = exc.retry_after if isinstance(exc, Throttled) else None
        raise ApplicationError(
            str(exc),
            type=type(exc).__name__,
            non_retryable=exc.permanent,
            next_retry_delay=timedelta(seconds=after) if after else None,
        ) from exc
