"""`remedy xid`: NVIDIA Xid errors, found in a kernel log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from remedy.xid.kernel_log import scan_kernel_log
from workers.cli.xid_events import event_json, event_line

app = typer.Typer(help="NVIDIA Xid errors.", no_args_is_help=True)


@app.command("parse")
def parse(
    source: Annotated[str, typer.Argument(help="Kernel log file, or - for standard input.")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Find Xid and NVSwitch SXid events in a kernel log (dmesg, /dev/kmsg, journald text):
    code, PCI address and MIG instance, GPU UUID, pid and process, fault class, and the action
    remedy takes with its reason."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        typer.echo(f"error: cannot read {source}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    for event in scan_kernel_log(text.splitlines()):
        typer.echo(event_json(event) if as_json else event_line(event))
