"""Follow a kernel log file with a cursor, so each line is handled once across agent restarts.

The cursor is the file's inode and byte offset; a rotated (new inode) or truncated file is read
from its start again."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

MAX_READ_BYTES = 4 * 1024 * 1024  # per call: a flood of kernel messages must not stall a probe


class KernelLogTail:
    def __init__(self, path: Path, cursor_file: Path | None = None) -> None:
        self.path = path
        self.cursor_file = cursor_file
        self._inode, self._offset = self._load_cursor()
        self._lock = threading.Lock()  # the probe loop and probe activities share a source

    def __str__(self) -> str:
        return f"file {self.path}"

    def read_new(self) -> list[str]:
        """Complete lines appended since the last call (a partial last line waits)."""
        with self._lock:
            return self._read_new()

    def _read_new(self) -> list[str]:
        stat = os.stat(self.path)
        if stat.st_ino != self._inode or stat.st_size < self._offset:
            self._inode, self._offset = stat.st_ino, 0
        with self.path.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read(MAX_READ_BYTES)
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        self._save_cursor()
        return complete.decode("utf-8", errors="replace").splitlines()

    def _load_cursor(self) -> tuple[int, int]:
        if self.cursor_file and self.cursor_file.exists():
            try:
                saved = json.loads(self.cursor_file.read_text())
                return int(saved["inode"]), int(saved["offset"])
            except (ValueError, KeyError, TypeError):
                pass  # a corrupt cursor: start over rather than stop reading
        return -1, 0

    def _save_cursor(self) -> None:
        if self.cursor_file:
            tmp = self.cursor_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"inode": self._inode, "offset": self._offset}))
            tmp.replace(self.cursor_file)
