"""The embedded default: a dev Temporal server with its Web UI, the controller worker, and a
simulated GPU fleet whose faults start real NodeRemediation ladders at a visible rate.

Here: the two ways to start it, on its own dev server (a fresh history each run unless resumed)
or on a server that runs already. The rest of it: demo_config (settings), demo_history (the
database), demo_run (the run), demo_console (what the workers log), demo_summary (the outcomes).
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from workers.client import connect_with, ensure_search_attributes, metrics_runtime
from workers.connection import ConnectOptions
from workers.demo_config import DemoConfig, demo_runbooks
from workers.demo_history import prepare_history, server_log
from workers.demo_run import run_demo
from workers.demo_summary import DemoSummary
from workers.dev_server import dev_server


class PortInUse(Exception):
    pass


async def run_embedded_demo(
    config: DemoConfig,
    *,
    port: int | None,
    ui_port: int | None,
    db: Path,
    resume: bool = False,
    echo: Callable[[str], None] = print,
    metrics_bind: str | None = None,
) -> DemoSummary:
    """The demo on its own dev server, whose history is ``db``: a fresh database unless
    ``resume`` (the last run's is kept beside it), which the first line says. ``metrics_bind``:
    where its workers serve Prometheus metrics (None: nowhere)."""
    runbooks = demo_runbooks(config)  # fail on a broken runbook before starting anything
    if port is not None and not _port_free(port):
        raise PortInUse(
            f"port {port} is already in use: pass another --port, or omit it to pick a free one"
        )
    if ui_port is not None and not _port_free(ui_port):
        raise PortInUse(
            f"UI port {ui_port} is already in use: pass another --ui-port, or omit "
            "it to use 8233 or a free port"
        )
    port = port or _free_port()
    ui_port = ui_port or (8233 if _port_free(8233) else _free_port())
    _stop_on_signals()
    echo(f"History          {prepare_history(db, resume=resume)}")
    log = server_log(db)
    runtime = metrics_runtime(metrics_bind, "demo") if metrics_bind else None
    async with dev_server(port, ui_port, db, log, runtime) as client:
        echo(f"Temporal server  127.0.0.1:{port} (log: {log})")
        if metrics_bind:
            echo(f"Metrics          http://{metrics_bind}/metrics")
        echo(f"Temporal Web UI  http://127.0.0.1:{ui_port}/namespaces/default/workflows")
        return await run_demo(client, config, runbooks, echo)


def _stop_on_signals() -> None:
    """SIGTERM (docker stop, kill) and SIGHUP (the terminal closed) end the demo like Ctrl-C:
    summary, then shutdown, the dev server with it."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, task.cancel)


async def run_demo_on(
    server: ConnectOptions,
    config: DemoConfig,
    echo: Callable[[str], None] = print,
    metrics_bind: str | None = None,
) -> DemoSummary:
    """The demo against a Temporal server that is already running (e.g. docker compose)."""
    runbooks = demo_runbooks(config)
    _stop_on_signals()
    client = await connect_with(
        server, "demo", runtime=metrics_runtime(metrics_bind, "demo") if metrics_bind else None
    )
    await ensure_search_attributes(client)
    echo(
        "History          kept by the server: the last demo's workflows on it go on "
        "(only the embedded server starts fresh)"
    )
    echo(f"Temporal server  {client.service_client.config.target_host}")
    return await run_demo(client, config, runbooks, echo)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
