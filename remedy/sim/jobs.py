"""Guarded jobs in the twin: each restart is recorded, none fails unless told to."""

from __future__ import annotations

import threading

from remedy.errors import ActionFailed


class SimJobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.restarts: list[tuple[str, str]] = []  # (namespace/name, reason)
        self.broken: set[str] = set()  # jobs whose restart fails

    def restart_job(self, namespace: str, name: str, reason: str) -> str:
        key = f"{namespace}/{name}"
        with self._lock:
            if key in self.broken:
                raise ActionFailed(f"job {key} could not be restarted")
            self.restarts.append((key, reason))
            return f"{key} restarted ({len(self.restarts)})"
