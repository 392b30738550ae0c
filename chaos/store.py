"""The fleet file: a simulated fleet and the chaos knobs that survive a SIGKILL of any process.

Every operation is one transaction: take an exclusive ``flock`` on a lock file beside the
fleet file, read the fleet, change it, write it back atomically (a temporary file, fsync,
rename over the old one, fsync of the directory) if it changed, release the lock. A process
killed anywhere in between leaves the file as the last finished operation wrote it: an
effect and its record in the node's ledger land together or not at all, as on a real node
object or an agent's state file. The lock is on its own file because the rename replaces the
fleet file's inode. ``flock`` locks belong to an open file, so the threads of one process
exclude each other as processes do."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.sim import SimFleet
from chaos.codec import decode_fleet, encode_fleet
from chaos.knobs import Knobs, Tally

VERSION = 1


@dataclass
class World:
    """What one transaction reads and may change."""

    fleet: SimFleet
    knobs: Knobs
    tally: Tally


class FleetStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")

    def create(self, fleet: SimFleet, knobs: Knobs | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            self._write(_encode(World(fleet, knobs or Knobs(), Tally())))

    @contextmanager
    def transaction(self) -> Iterator[World]:
        """The world under the lock; what the block changes is written when it ends, whether
        it ends normally or by an exception (an answer lost after its effect keeps the
        effect)."""
        with self._locked():
            text = self.path.read_text()
            world = _decode(text)
            try:
                yield world
            finally:
                new = _encode(world)
                if new != text:
                    self._write(new)

    def read(self) -> World:
        """A snapshot (changes to it are not kept)."""
        with self._locked():
            return _decode(self.path.read_text())

    def set_knobs(self, knobs: Knobs) -> None:
        with self.transaction() as world:
            world.knobs = knobs.model_copy(update={"draws": world.knobs.draws})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, text: str) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with tmp.open("w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _encode(world: World) -> str:
    data: dict[str, Any] = {
        "version": VERSION,
        "knobs": world.knobs.model_dump(mode="json"),
        "tally": world.tally.model_dump(mode="json"),
        "fleet": encode_fleet(world.fleet),
    }
    return json.dumps(data, separators=(",", ":"))


def _decode(text: str) -> World:
    data = json.loads(text)
    if data.get("version") != VERSION:
        raise ValueError(f"fleet file version {data.get('version')!r}, expected {VERSION}")
    return World(
        fleet=decode_fleet(data["fleet"]),
        knobs=Knobs.model_validate(data["knobs"]),
        tally=Tally.model_validate(data["tally"]),
    )
