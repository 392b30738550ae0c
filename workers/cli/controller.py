"""`remedy controller`: the controller worker, wired to a Kubernetes cluster (registered in
__init__.py). Its flags and the settings they make: controller_flags.py; the process:
workers/serving.py; the cluster: the composition root, workers/providers."""

from __future__ import annotations

import typer

from workers.cli.common import serve
from workers.cli.controller_flags import ControllerFlags
from workers.flags import command


def _controller(flags: ControllerFlags) -> None:
    """Run the controller worker against a Kubernetes cluster."""
    from workers.serving import run_controller
    from workers.stall_watch import EXIT_STALLED, WorkerStalled

    settings = flags.settings()  # a bad flag or file: one line and exit 1, before connecting

    async def main() -> None:
        try:
            await run_controller(settings)
        except WorkerStalled as stalled:  # a fresh process takes over every ladder
            typer.echo(f"error: {stalled}; exiting for a fresh start", err=True)
            raise typer.Exit(EXIT_STALLED) from None

    serve(main)


controller = command(ControllerFlags, _controller, "controller")
