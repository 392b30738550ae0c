"""`remedy xid`: NVIDIA Xid errors, found in a kernel log."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from remedy.xid.catalog import Family, XidInfo, family_of, load_catalog
from remedy.xid.kernel_log import scan_kernel_log
from workers.cli.exits import BAD_INPUT
from workers.cli.xid_events import event_json, event_line
from workers.flags.options import JsonOption

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
        raise typer.Exit(BAD_INPUT) from None
    for event in scan_kernel_log(text.splitlines()):
        typer.echo(event_json(event) if as_json else event_line(event))


@app.command("explain")
def explain(
    code: Annotated[int, typer.Argument(help="The Xid number.")],
    architecture: Annotated[
        int | None,
        typer.Option(help="NVML architecture (nvmlDeviceGetArchitecture: Volta 5 … Blackwell 10)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """What NVIDIA's Xid catalog says about CODE and what remedy does first: description,
    mnemonic, immediate and investigatory buckets, remedy's action, where it applies, the
    message decoder and the catalog's version. Exit 1 when the catalog does not list CODE."""
    catalog = load_catalog()
    info = catalog.lookup(code, architecture)
    known = code in catalog.codes()
    applies = {family.value: catalog.applies_in(code, family) for family in Family}
    if as_json:
        typer.echo(
            json.dumps(
                {
                    **info.model_dump(mode="json", by_alias=True),
                    "known": known,
                    "architecture": architecture,
                    "applies": applies,
                    "source": catalog.source.model_dump(by_alias=True),
                }
            )
        )
    else:
        for label, value in _explained(info, known, applies, architecture):
            typer.echo(f"{label + ':':<15}{value}" if label else value)
        source = catalog.source
        typer.echo(f"{'source:':<15}{source.title}, {source.version}\n{'':<15}{source.url}")
    if not known:
        raise typer.Exit(1)


def _explained(
    info: XidInfo, known: bool, applies: dict[str, bool | None], architecture: int | None
) -> list[tuple[str, str]]:
    if not known:
        return [
            ("", f"Xid {info.code}: not in NVIDIA's catalog (this version)"),
            ("remedy", f"{info.action.value} ({info.severity}): {info.description}"),
        ]
    said = {True: "yes", False: "no", None: "not covered"}
    family = family_of(architecture)
    on = f" (as on {family.value})" if family else ""
    rows = [
        ("", f"Xid {info.code}  {info.mnemonic}{on}"),
        ("NVIDIA", info.description),
        (
            "immediate",
            f"{info.bucket or '(blank)'} → remedy: {info.action.value} ({info.severity})",
        ),
        ("investigatory", info.investigate or "(blank)"),
        ("class", info.fault_class),
        ("products", ", ".join(info.products) or "none"),
        ("applies", "; ".join(f"{f}: {said[a]}" for f, a in applies.items())),
        ("decode", f"the message decides ({info.decode})" if info.decode != "none" else "none"),
    ]
    return rows + ([("note", info.note)] if info.note else [])
