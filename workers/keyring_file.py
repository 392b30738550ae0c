"""The controller's ``--keyring`` file, read again when it changes: a key removed from it
stops counting on running ladders within minutes (a ladder reads the keyring anew when its
copy is older than workflows/operator_keys.FRESH_FOR), with no controller restart. A file
that cannot be read or parsed any more keeps nothing: every decision is refused until it is
mended (fail closed), and the error is logged once per change."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from remedy.trust.signing import Keyring, SigningError, parse_keyring

log = logging.getLogger(__name__)


class KeyringFile:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None  # (mtime ns, size, inode) last read
        self._keyring = self._read()

    def __call__(self) -> Keyring:
        """The keyring as the file says now (read again only when it changed)."""
        with self._lock:
            try:
                stat = self._path.stat()
                seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
            except OSError as exc:
                return self._broken(f"{self._path}: {exc.strerror or exc}")
            if seen != self._seen:
                self._keyring = self._read()
            return self._keyring

    def _read(self) -> Keyring:
        try:
            stat = self._path.stat()
            keyring = parse_keyring(self._path.read_text(), str(self._path))
        except (OSError, SigningError) as exc:
            return self._broken(str(exc))
        self._seen = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        log.info("operator keyring %s: %d operator(s)", self._path, len(keyring.operators))
        return keyring

    def _broken(self, why: str) -> Keyring:
        if self._keyring_ok():
            log.error("operator keyring unreadable, every decision refused until mended: %s", why)
        self._seen = None
        self._keyring = Keyring(required=True)  # no operators: nothing counts
        return self._keyring

    def _keyring_ok(self) -> bool:
        return getattr(self, "_keyring", None) is None or bool(self._keyring.operators)
