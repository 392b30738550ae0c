"""The agent's durable book of keyed actions (remedy/once.py), a JSON file on the node's own
disk: it outlives the agent's process and a reboot, so the agent that comes back after the
reboot it issued finds the key and the boot it was issued from, and does not reboot again."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from remedy.errors import ActionFailed
from remedy.once import LedgerEntry, kept

_ENTRIES = TypeAdapter(list[LedgerEntry])


class FileLedger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _entries(self) -> list[LedgerEntry]:
        try:
            return _ENTRIES.validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValidationError) as exc:
            # Acting without knowing what was done could repeat a reboot: refuse instead.
            raise ActionFailed(f"cannot read the action ledger {self.path}: {exc}") from exc

    def entry(self, key: str) -> LedgerEntry | None:
        return next((e for e in self._entries() if e.key == key), None)

    def record(self, entry: LedgerEntry) -> None:
        """Written to a new file, flushed to disk, then renamed over the old: a crash leaves
        the old book or the new, never half of one."""
        body = _ENTRIES.dump_json(kept(self._entries(), entry))
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as out:
                out.write(body)
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
