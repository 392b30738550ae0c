"""How the controller's door is set (remedy.ladder.intake): the controllers' seal, the queue the
node agents poll, and the runbooks agents may ask for by name besides the controller's own.

The seal is a secret only controllers hold: the findings a controller makes itself are sealed
with it, and any controller checks them. One controller alone can make its own at start; two
or more must share one (``--seal-key-file``, a Secret mounted into every controller pod), or a
finding sealed by one is refused by the others."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from contract.names import node_task_queue
from remedy.ladder.intake import Door
from remedy.runbook import RunbookSet
from remedy.trust.signing import Keyring

SEAL_BYTES = 32


class SealError(ValueError):
    """A seal file that cannot be used; the message says which and why."""


def new_seal() -> bytes:
    return secrets.token_bytes(SEAL_BYTES)


def seal_from_file(path: Path) -> bytes:
    """A seal file: at least 32 bytes of secret (``head -c 32 /dev/urandom``)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SealError(f"{path}: {exc.strerror or exc}") from None
    if len(data.strip()) < SEAL_BYTES:
        raise SealError(f"{path}: {len(data.strip())} bytes; a seal needs at least {SEAL_BYTES}")
    return data.strip()


@dataclass(frozen=True)
class DoorSettings:
    seal: bytes = field(default_factory=new_seal, repr=False)
    # One queue every agent polls (the simulated fleet's); None: each node's own queue
    # (contract.names.node_task_queue), which is where a real agent polls.
    agents_queue: str | None = None
    # Runbooks agents of some pools load beside the shipped ones: the controller climbs them
    # when asked by name, and never matches its own findings with them.
    pool_runbooks: RunbookSet | None = None

    def door(self, runbooks: RunbookSet, keyring: Keyring) -> Door:
        known = (runbooks,) if self.pool_runbooks is None else (runbooks, self.pool_runbooks)
        return Door(runbooks=known, seal=self.seal, keyring=keyring, node_queue=self.node_queue)

    def node_queue(self, node: str) -> str | None:
        return self.agents_queue or node_task_queue(node)


def keyring_source(keyring: Keyring | Callable[[], Keyring] | None) -> Callable[[], Keyring]:
    """The keyring as the controller reads it at each use (a file read again when it
    changed: workers/keyring_file.py), or as it was given."""
    if callable(keyring):
        return keyring
    fixed = keyring or Keyring()  # none: decisions recorded unverified (the demo)
    return lambda: fixed
