"""The processes tests start, and what is left of them (event-loop tasks too).

Every process a test starts goes in a process group of its own (``Children.start``), and is
stopped with everything it started when the test ends, however it ends: a signal to its group
first, so its own clean-up runs, then SIGKILL to the group and to any descendant that had moved
to a group of its own (a dev server started with ``start_new_session``).

pytest itself is made a child subreaper (Linux): a process whose parent died is re-parented to
pytest instead of init, so ``leftover_children`` sees every process the suite left behind, not
only its direct children.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

TASK_GRACE_S = 1.0  # for a task still finishing when its test ends
TASK_STOP_S = 90.0  # for a cancelled task to stop (a worker waits out its long polls, ~60 s)
STOP_GRACE_S = 15.0  # a demo or harness stopping its dev server (which waits up to 15 s itself)
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Seen:
    """A process as /proc shows it; ``started`` (clock ticks after boot) tells a reused pid."""

    pid: int
    ppid: int
    group: int
    state: str
    started: int

    def command(self) -> str:
        try:
            argv = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return "?"
        return " ".join(a.decode(errors="replace") for a in argv if a) or "?"

    def alive(self) -> bool:
        return self.state != "Z"


def free_port() -> int:
    """A loopback port nothing listens on now (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def processes() -> Iterator[Seen]:
    for name in os.listdir("/proc"):
        if name.isdigit() and (seen := _stat(int(name))) is not None:
            yield seen


def _stat(pid: int) -> Seen | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name in parentheses may hold anything
    return Seen(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]))


def descendants(pid: int) -> list[Seen]:
    """Every process below ``pid``, its children's children included."""
    table = list(processes())
    found: list[Seen] = []
    parents = {pid}
    while below := [p for p in table if p.ppid in parents and p not in found]:
        found += below
        parents = {p.pid for p in below}
    return found


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children (Linux 3.4+)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def leftover_children() -> list[Seen]:
    """This process's children still running (zombies are reaped, not counted)."""
    left = []
    for child in processes():
        if child.ppid != os.getpid():
            continue
        if child.alive():
            left.append(child)
        else:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, os.WNOHANG)
    return left


def kill_tree(seen: Seen) -> None:
    """SIGKILL to a process, its group when it leads one, and everything below it."""
    for proc in [seen, *descendants(seen.pid)]:
        _kill(proc)


def _kill(proc: Seen) -> None:
    if _stat(proc.pid) != proc:
        return  # gone, or its pid belongs to another process now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if proc.group == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)


def stop_group(
    proc: subprocess.Popen[Any],
    first: signal.Signals = signal.SIGTERM,
    grace_s: float = STOP_GRACE_S,
) -> int:
    """``first`` to the process's group, SIGKILL after ``grace_s`` to the group and to whatever
    it started that is still there; its exit status."""
    below = descendants(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    if proc.poll() is None:
        below += descendants(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for seen in below:
        kill_tree(seen)
    return proc.returncode


class Children:
    """The processes one test starts (the ``processes`` fixture; a context manager elsewhere):
    each in a group of its own, all stopped when the test or block ends."""

    def __init__(self) -> None:
        self._started: list[subprocess.Popen[Any]] = []

    def start(
        self, argv: Sequence[str | os.PathLike[str]], **options: Any
    ) -> subprocess.Popen[Any]:
        """``subprocess.Popen`` in a process group of its own."""
        proc: subprocess.Popen[Any] = subprocess.Popen(argv, process_group=0, **options)
        self._started.append(proc)
        return proc

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        timeout: float = 120,
        input: str | None = None,
        **options: Any,
    ) -> subprocess.CompletedProcess[str]:
        """``subprocess.run(argv, capture_output=True, text=True, ...)``; at the timeout its whole
        group is killed (not only the process, whose children would hold its pipes open)."""
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        proc = self.start(
            argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options
        )
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc, signal.SIGKILL, 0)
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def close(self) -> None:
        for proc in reversed(self._started):
            stop_group(proc)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        self._started.clear()

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


async def stop_tasks_since(before: set[asyncio.Task[Any]]) -> list[str]:
    """Tasks started since ``before`` and still running after a moment's grace: cancelled, and
    waited for (bounded); what each was waiting on."""
    this = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() - before if t is not this and not t.done()]
    if left:
        await asyncio.wait(left, timeout=TASK_GRACE_S)  # finishing as the test ended
    left = [t for t in left if not t.done()]
    waiting = [_waiting_at(t) for t in left]  # before the cancel unwinds them
    for task in left:
        task.cancel()
    if left:
        await asyncio.wait(left, timeout=TASK_STOP_S)
    return [
        w + ("" if t.done() else " (would not stop)") for t, w in zip(left, waiting, strict=True)
    ]


def _waiting_at(task: asyncio.Task[Any]) -> str:
    """The task's coroutine and the chain of awaits it is suspended in, innermost last."""
    coro: Any = task.get_coro()
    at = [getattr(coro, "__qualname__", repr(coro))]
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            at.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(at)
