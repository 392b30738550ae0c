"""`remedy xid`: NVIDIA Xid errors, found in a kernel log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from remedy.xid import parse_kernel_log

app = typer.Typer(help="NVIDIA Xid errors.", no_args_is_help=True)


@app.command("parse")
def parse(
    source: Annotated[str, typer.Argument(help="Kernel log file, or - for standard input.")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Find Xid events in a kernel log (dmesg, /dev/kmsg, journald text): code, PCI address,
    pid and process, GPU UUID, fault class and NVIDIA's recommended first action."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        typer.echo(f"error: cannot read {source}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    for event in parse_kernel_log(text.splitlines()):
        if as_json:
            typer.echo(event.model_dump_json())
        else:
            who = f" pid={event.pid} {event.process or ''}" if event.pid else ""
            typer.echo(
                f"line {event.line}: Xid {event.code} on {event.pci_bus_id}"
                f"{' ' + event.gpu_uuid if event.gpu_uuid else ''}{who}: "
                f"{event.fault_class} → {event.recommended_action}"
            )
