"""The processes a chaos run starts: each in its own process group, so that a SIGKILL takes
the whole of it and Ctrl-C at the harness's terminal reaches only the harness, which stops
them all (``Processes`` as a context manager: on the way out, however it is left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from contract.search_attributes import dev_server_flags
from workers.binaries import installed_binary

STOP_GRACE_S = 5.0
ROOT = Path(__file__).resolve().parent.parent  # where `python -m chaos` finds the packages


class Proc:
    """One process, started again under the same command as often as the harness likes."""

    def __init__(
        self, name: str, argv: list[str], log: Path, address: str = "", cwd: Path | None = None
    ) -> None:
        self.name, self.argv, self.log, self.cwd = name, argv, log, cwd
        self.address = address  # where it serves, if it is a server
        self.starts = 0
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.alive():
            return
        self._reap()
        env = dict(os.environ)
        # The workflow sandbox imports the workflow modules for every new run: from source each
        # time without bytecode.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with self.log.open("ab") as out, _uninterrupted():
            self._popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                cwd=self.cwd,
            )
        self.starts += 1

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole process group: no goodbyes, as in a crash."""
        self._signal(signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period."""
        if self._popen is None:
            return
        self._signal(signal.SIGTERM)
        try:
            self._popen.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def _signal(self, sig: signal.Signals) -> None:
        if self._popen is None or self._popen.poll() is not None:
            return  # exited (and reaped): its pid may belong to someone else by now
        try:
            os.killpg(self._popen.pid, sig)  # its own group: the pid is the group's id
        except ProcessLookupError:
            pass

    def _reap(self) -> None:
        if self._popen is not None:
            self._popen.wait()
            self._popen = None


class Processes:
    """Every process of a run; ``with Processes(...)`` stops them all when the block ends."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self._all: list[Proc] = []

    def add(self, name: str, argv: list[str], address: str = "", cwd: Path | None = None) -> Proc:
        proc = Proc(name, argv, self.logs / f"{name}.log", address, cwd)
        self._all.append(proc)
        return proc

    def role(self, name: str, *args: str) -> Proc:
        """A ``python -m chaos ROLE`` process (controller, agents)."""
        return self.add(name, [sys.executable, "-m", "chaos", *args], cwd=ROOT)

    def dev_server(self, name: str, port: int, db: Path) -> Proc:
        return self.add(
            name,
            [
                installed_binary("temporal"),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--headless",
                "--log-level",
                "warn",
                "--db-filename",
                str(db),
                *dev_server_flags(),
            ],
            address=f"127.0.0.1:{port}",
        )

    def stop_all(self) -> None:
        for proc in reversed(self._all):
            proc.stop()

    def __enter__(self) -> Processes:
        self.logs.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


class _Deferral:
    depth = 0
    pending: int | None = None


_DEFER = _Deferral()


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """A process being started is not interrupted halfway: a stop signal inside Popen would leave
    the child running with its pid never kept (CI saw one left over). The signal waits until
    the pid is kept, then interrupts as usual."""
    _DEFER.depth += 1
    try:
        yield
    finally:
        _DEFER.depth -= 1
    if _DEFER.depth == 0 and _DEFER.pending is not None:
        signum, _DEFER.pending = _DEFER.pending, None
        raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (kill, a CI runner giving up) ends the harness as Ctrl-C does: by an exception,
    so every ``finally`` runs and every process it started is stopped — after a start under way
    has kept its pid."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if _DEFER.depth:
            _DEFER.pending = signum
            return
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
