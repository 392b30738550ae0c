"""The `remedy` command."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from remedy.runbook import RunbookError, load_runbooks

app = typer.Typer(help="remedy keeps GPU fleets healthy.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
runbooks_app = typer.Typer(help="Author and check runbooks.", no_args_is_help=True)
app.add_typer(runbooks_app, name="runbooks")

DEFAULT_RUNBOOKS = Path(__file__).resolve().parent.parent / "runbooks"


@runbooks_app.command("validate")
def validate(paths: Annotated[list[Path], typer.Argument(help="Runbook files or folders.")]
             ) -> None:
    """Check runbooks: exit 0 when all are valid, else one FILE:LINE: FIELD: message per error."""
    try:
        runbooks = load_runbooks(paths)
    except RunbookError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        typer.echo(f"{len(exc.problems)} problem(s); nothing loaded", err=True)
        raise typer.Exit(1) from None
    for runbook in runbooks:
        ladder = " → ".join(r.action.value for r in runbook.ladder) or "hold for a human"
        typer.echo(f"ok  {runbook.name}: {ladder}")


@app.command()
def demo(
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    nodes: Annotated[int, typer.Option(min=1, help="Simulated GPU nodes.")] = 16,
    gpus: Annotated[int, typer.Option(min=1, help="GPUs per node.")] = 8,
    fault_every: Annotated[float, typer.Option(min=0.1, help="Seconds between faults.")] = 3.0,
    speedup: Annotated[float, typer.Option(min=1.0, help="Runbook time runs this much faster.")]
    = 60.0,
    port: Annotated[int | None, typer.Option(help="Temporal port (default: a free one).")] = None,
    ui_port: Annotated[int | None, typer.Option(help="Web UI port (default 8233 if free).")]
    = None,
    db: Annotated[Path, typer.Option(help="SQLite file of the dev server.")]
    = Path(".demo/temporal.sqlite"),
    runbooks: Annotated[Path, typer.Option(help="Runbook folder.")] = DEFAULT_RUNBOOKS,
    seed: Annotated[int, typer.Option(help="Seed of the fault injector.")] = 1,
    address: Annotated[str | None, typer.Option(
        help="Use this Temporal server (host:port) instead of starting the dev server.")] = None,
) -> None:
    """Run the embedded default: dev Temporal server + Web UI + worker + a simulated GPU fleet."""
    from workers.demo import DemoConfig, PortInUse, run_demo_on, run_embedded_demo

    config = DemoConfig(nodes=nodes, gpus_per_node=gpus, fault_every_s=fault_every,
                        speedup=speedup, duration_s=duration, seed=seed, runbooks=runbooks)
    try:
        if address:
            asyncio.run(run_demo_on(address, config))
        else:
            asyncio.run(run_embedded_demo(config, port=port, ui_port=ui_port, db=db))
    except PortInUse as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except RunbookError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass


def main() -> None:
    try:
        app()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    # The Temporal core's native threads can outlive asyncio.run and crash interpreter
    # finalization ("PyGILState_Release ... finalizing"); everything is shut down and flushed
    # by now, so skip finalization instead of turning a clean exit into a core dump.
    sys.stdout.flush()
    sys.stderr.flush()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    os._exit(code or 0)
