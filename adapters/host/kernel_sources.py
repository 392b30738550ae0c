"""Where the agent reads the kernel log for Xids: ``/dev/kmsg``, the journal, or a file.

Many GPU node images keep the kernel log only in journald (Bottlerocket, Amazon Linux 2023):
there is no kern.log to tail. ``/dev/kmsg`` is the kernel's own ring buffer (this boot only);
``journalctl -k -b`` asks journald. Each source keeps a cursor (a kmsg sequence number with its
boot, a journal cursor, a file offset) so a line is handled once, across agent restarts too.
A source that cannot be read raises ``OSError`` naming itself; the probe turns that into a
finding (``kernel_log/KernelLogUnreadable``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

from adapters.host.kernel_log import MAX_READ_BYTES, KernelLogTail
from adapters.host.output import command_line, tool_output
from remedy.xid.kernel_log import KernelLogSource

KMSG = Path("/dev/kmsg")
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")
LOG_FILES = (Path("/var/log/kern.log"), Path("/var/log/messages"))
JOURNAL_TIMEOUT_S = 10.0
# ``prio,seq,usec,flags[,...];message``; continuation lines (`` KEY=value``) start with a space.
_KMSG_RECORD = re.compile(r"^\d+,(?P<seq>\d+),\d+,[^;]*;")
_JOURNAL_CURSOR = "-- cursor: "


class _Cursor:
    """A small JSON object kept in a file (written whole, then renamed into place)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # a corrupt cursor: start over rather than stop reading
        return saved if isinstance(saved, dict) else {}

    def save(self, value: dict[str, Any]) -> None:
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(value))
            tmp.replace(self.path)


class KmsgSource:
    """Records of the kernel's ring buffer after the last sequence number handled in this boot
    (a new boot numbers from 0 again: the cursor keeps the boot id it belongs to)."""

    def __init__(
        self, path: Path = KMSG, cursor_file: Path | None = None, boot_id_file: Path = BOOT_ID_FILE
    ) -> None:
        self.path, self._boot_id_file = path, boot_id_file
        self._cursor = _Cursor(cursor_file)
        saved = self._cursor.load()
        self._boot, self._seq = str(saved.get("boot_id", "")), _int(saved.get("seq"), -1)
        self._lock = threading.Lock()  # the probe loop and probe activities share a source

    def __str__(self) -> str:
        return f"kmsg {self.path}"

    def read_new(self) -> list[str]:
        with self._lock:
            records = _read_records(self.path)
            boot = self._boot_id()
            if boot != self._boot:
                self._boot, self._seq = boot, -1
            out = []
            for record in records:
                match = _KMSG_RECORD.match(record)
                if match is None or int(match["seq"]) <= self._seq:
                    continue
                self._seq = int(match["seq"])
                out.append(record)
            self._cursor.save({"boot_id": self._boot, "seq": self._seq})
            return out

    def _boot_id(self) -> str:
        try:
            return self._boot_id_file.read_text().strip()
        except OSError:
            return ""


def _read_records(path: Path) -> list[str]:
    """Every record in the ring buffer. Each read() of /dev/kmsg returns one record; EAGAIN at
    the end; EPIPE when the record was overwritten before it was read (skip it). A plain file
    (a test's fixture) reads the same way."""
    chunks, size = [], 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while size < MAX_READ_BYTES:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace").splitlines()


class JournalSource:
    """Kernel messages of this boot from journald (``journalctl -k -b``), after the cursor
    journalctl printed last time. ``directory``: a journal mounted from the host."""

    def __init__(
        self,
        cursor_file: Path | None = None,
        directory: Path | None = None,
        journalctl: str = "journalctl",
        timeout_s: float = JOURNAL_TIMEOUT_S,
    ) -> None:
        self.directory, self._journalctl, self._timeout_s = directory, journalctl, timeout_s
        self._cursor_file = _Cursor(cursor_file)
        self._cursor = str(self._cursor_file.load().get("cursor", ""))
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return "journal" + (f" {self.directory}" if self.directory else "")

    def command(self) -> list[str]:
        command = [self._journalctl, "-k", "-b", "-o", "short-iso", "--no-pager", "-q"]
        command += ["--show-cursor", *self._mounted()]
        return command + ([f"--after-cursor={self._cursor}"] if self._cursor else [])

    def check_command(self) -> list[str]:
        """What ``read_new`` asks journald, for no line at all: it fails as the read would (no
        such directory, no journal of this boot in it, journald unreachable) and moves no
        cursor (`remedy doctor` runs it)."""
        return [self._journalctl, "-k", "-b", "-n", "0", "--no-pager", "-q", *self._mounted()]

    def _mounted(self) -> list[str]:
        return ["-D", str(self.directory)] if self.directory else []

    def read_new(self) -> list[str]:
        with self._lock:
            command = self.command()
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=self._timeout_s
                )
            except FileNotFoundError:
                raise OSError(f"{self._journalctl} is not installed") from None
            except subprocess.TimeoutExpired:
                raise OSError(
                    f"{self._journalctl} gave no answer in {self._timeout_s:g}s"
                ) from None
            if done.returncode != 0:
                why = tool_output(done.stderr, 300) or "no output"
                raise OSError(f"{command_line(command)} exited {done.returncode}: {why}")
            lines = done.stdout.splitlines()
            cursors = [line for line in lines if line.startswith(_JOURNAL_CURSOR)]
            if cursors:
                self._cursor = cursors[-1].removeprefix(_JOURNAL_CURSOR).strip()
                self._cursor_file.save({"cursor": self._cursor})
            return [line for line in lines if not line.startswith("-- ")]


class AutoSource:
    """The first source this node can read, looked for until one is found: ``/dev/kmsg``, then
    the journal, then /var/log/kern.log, then /var/log/messages. Readable means read: the
    first read's lines are the first answer."""

    def __init__(
        self,
        cursor_file: Path | None = None,
        kmsg: Path = KMSG,
        journalctl: str = "journalctl",
        files: tuple[Path, ...] = LOG_FILES,
    ) -> None:
        self._cursor_file, self._kmsg, self._files = cursor_file, kmsg, files
        self._journalctl = journalctl
        self.chosen: KernelLogSource | None = None
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return f"auto: {self.chosen}" if self.chosen else "auto: none found yet"

    def read_new(self) -> list[str]:
        with self._lock:
            if self.chosen is not None:
                return self.chosen.read_new()
            tried = []
            for source in self._candidates():
                try:
                    lines = source.read_new()
                except OSError as exc:
                    tried.append(f"{source}: {exc}")
                    continue
                self.chosen = source
                return lines
            raise OSError(f"no kernel log source can be read ({'; '.join(tried)})")

    def _candidates(self) -> list[KernelLogSource]:
        return [
            KmsgSource(self._kmsg, self._cursor_file),
            JournalSource(self._cursor_file, journalctl=self._journalctl),
            *(KernelLogTail(path, self._cursor_file) for path in self._files),
        ]


def kernel_log_source(spec: str, cursor_file: Path | None = None) -> KernelLogSource | None:
    """``--kernel-log``: ``auto``, ``kmsg``, ``journal``, ``journal:DIR``, ``file:PATH`` (or a
    bare path), or ``none``."""
    kind, _, arg = spec.partition(":")
    if spec == "none":
        return None
    if spec == "auto":
        return AutoSource(cursor_file)
    if kind == "kmsg":
        return KmsgSource(Path(arg) if arg else KMSG, cursor_file)
    if kind == "journal":
        return JournalSource(cursor_file, Path(arg) if arg else None)
    if kind == "file" and arg:
        return KernelLogTail(Path(arg), cursor_file)
    if "/" in spec:
        return KernelLogTail(Path(spec), cursor_file)
    raise ValueError(f"{spec!r}: use auto, kmsg, journal, journal:DIR, file:PATH or none")


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
