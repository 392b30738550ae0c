"""`remedy demo`: the embedded default, a dev Temporal server, its Web UI, the workers and a
simulated GPU fleet (registered in __init__.py; workers/demo.py runs it)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer

from remedy.runbook import RunbookError
from workers.cli import active_checks as checks
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.exits import BAD_INPUT
from workers.flags.options import DEFAULT_RUNBOOKS, DemoMetricsOption, RunbooksOption


def demo(
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    nodes: Annotated[int, typer.Option(min=1, help="Simulated GPU nodes.")] = 16,
    gpus: Annotated[int, typer.Option(min=1, help="GPUs per node.")] = 8,
    fault_every: Annotated[float, typer.Option(min=0.1, help="Seconds between faults.")] = 3.0,
    speedup: Annotated[
        float, typer.Option(min=1.0, help="Runbook time runs this much faster.")
    ] = 60.0,
    port: Annotated[int | None, typer.Option(help="Temporal port (default: a free one).")] = None,
    ui_port: Annotated[int | None, typer.Option(help="Web UI port (default 8233 if free).")] = None,
    db: Annotated[
        Path,
        typer.Option(
            help="SQLite file of the dev server: a fresh one each run, the last run's kept "
            "as NAME.previous.sqlite."
        ),
    ] = Path(".demo/temporal.sqlite"),
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Go on with the last run's --db and its workflows (ladders, leases, holds) "
            "instead of a fresh one.",
        ),
    ] = False,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    shared_runbooks: Annotated[
        Path | None,
        typer.Option(
            help="Runbooks the shared inference node's agent loads beside --runbooks (default: "
            "examples/runbooks, whose inference-gpu-ecc takes out only the faulty GPU)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the fault injector.")] = 1,
    slow_node: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.5,
            help="The first guarded job runs elastic with one node this much slower (0.25: "
            "25 %) and nothing else showing it: its guard must find the node, prove it and "
            "go on without it. 0: no slow node.",
        ),
    ] = 0.25,
    address: Annotated[
        str | None,
        typer.Option(
            help="Use this Temporal server (host:port) instead of starting the dev server; "
            "the rest of the connection as for any command (`remedy --help`)."
        ),
    ] = None,
    metrics_bind: DemoMetricsOption = None,
    active_check_every: checks.EveryOption = "15s",
    active_check_interval: checks.IntervalOption = "1m",
    active_check_max_age: checks.MaxAgeOption = "10m",
) -> None:
    """Run the embedded default: dev Temporal server + Web UI + worker + a simulated GPU fleet."""
    from workers.demo import PortInUse, run_demo_on, run_embedded_demo
    from workers.demo_config import EXAMPLE_RUNBOOKS, DemoConfig

    if resume and address:
        typer.echo(
            "error: --resume is for the embedded dev server; the server at --address keeps "
            "its history anyway",
            err=True,
        )
        raise typer.Exit(BAD_INPUT)

    active = checks.active_check_policies(
        active_check_every, active_check_interval, active_check_max_age, None
    )

    config = DemoConfig(
        nodes=nodes,
        gpus_per_node=gpus,
        fault_every_s=fault_every,
        speedup=speedup,
        duration_s=duration,
        seed=seed,
        slow_node=slow_node or None,
        runbooks=runbooks,
        shared_runbooks=shared_runbooks or EXAMPLE_RUNBOOKS,
        # Wall time, like the demo's: a busy node waits a lease half a minute, not half an hour.
        active_checks=active[0].model_copy(update={"lease_wait": timedelta(seconds=30)})
        if active
        else None,
    )
    try:
        if address:
            on_temporal(run_demo_on(temporal(address), config, metrics_bind=metrics_bind))
        else:
            asyncio.run(
                run_embedded_demo(
                    config,
                    port=port,
                    ui_port=ui_port,
                    db=db,
                    resume=resume,
                    metrics_bind=metrics_bind,
                )
            )
    except PortInUse as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except RunbookError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:  # Ctrl-C is how a demo ends: everything it started is stopped
        return
