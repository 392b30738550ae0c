"""The agent's durable book of keyed actions (remedy/core/once.py), a JSON file on the node's own
disk: it outlives the agent's process and a reboot, so the agent that comes back after the
reboot it issued finds the key and the boot it was issued from, and does not reboot again.

Reads and writes hold an exclusive lock on a file beside it (activities run side by side in
the agent's threads); each write goes to a new file, flushed, then renamed over the old."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from remedy.core.errors import ActionFailed
from remedy.core.once import LedgerEntry, find, with_entry


class FileLedger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._threads = threading.Lock()

    def claim(self, entry: LedgerEntry) -> LedgerEntry | None:
        with self._locked():
            book = self._book()
            recorded = find(book, entry.key)
            if recorded is None:
                self._write(with_entry(book, entry))
            return recorded

    def record(self, entry: LedgerEntry) -> None:
        with self._locked():
            self._write(with_entry(self._book(), entry))

    def entry(self, key: str) -> LedgerEntry | None:
        with self._locked():
            return find(self._book(), key)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = self.path.with_suffix(".lock").open("a")
        except OSError as exc:
            raise ActionFailed(f"cannot open the action ledger {self.path}: {exc}") from exc
        with self._threads, lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _book(self) -> list[Any]:
        try:
            book = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            # Acting without knowing what was done could repeat a reboot: refuse instead.
            raise ActionFailed(f"cannot read the action ledger {self.path}: {exc}") from exc
        if not isinstance(book, list):
            raise ActionFailed(f"the action ledger {self.path} is not a list of actions")
        return book

    def _write(self, book: list[Any]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w") as out:
                json.dump(book, out, separators=(",", ":"))
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            raise ActionFailed(f"cannot write the action ledger {self.path}: {exc}") from exc
