"""The emulator's clock. Everything it stamps (creation, deletion, managedFields) and every
grace period it waits out is on this clock, which moves only when a test moves it: a test of a
pod Terminating for its grace period steps time instead of sleeping through it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    """Starts at the wall clock's second (timestamps look like a live server's) and stays
    there until ``advance``."""

    def __init__(self, start: datetime | None = None) -> None:
        self._at = start or datetime.now(UTC).replace(microsecond=0)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._at

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._at += timedelta(seconds=seconds)

    def stamp(self, later_s: float = 0.0) -> str:
        """RFC 3339 to the second, as the API server writes times (``later_s`` from now)."""
        return stamp(self.now() + timedelta(seconds=later_s))


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
