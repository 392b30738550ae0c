"""The controller's door options (workers/door.py): the operators' keyring, the controllers'
seal and the runbooks some pools' agents load, and the settings they make."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workers.cli.common import runbooks_or_exit
from workers.cli.exits import BAD_INPUT
from workers.door import DoorSettings, SealError, seal_from_file

KeyringOption = Annotated[
    Path | None,
    typer.Option(
        envvar="REMEDY_KEYRING",
        help="Operators' public keys (one 'ssh-ed25519 KEY NAME' line each; env "
        "REMEDY_KEYRING): ladders then take only decisions signed by one of them. "
        "Without: decisions are recorded unverified. Read again when it changes: a key "
        "removed stops counting within minutes.",
    ),
]
SealKeyOption = Annotated[
    Path | None,
    typer.Option(
        envvar="REMEDY_SEAL_KEY_FILE",
        help="The controllers' seal: 32 bytes or more of secret that every controller replica "
        "shares (a Secret), for the findings they make themselves. Without: one of this "
        "process's own, which other replicas cannot check.",
    ),
]
PoolRunbooksOption = Annotated[
    list[Path] | None,
    typer.Option(
        help="Runbooks some pools' agents load beside --runbooks (repeat the option): the "
        "controller climbs them when an agent asks by name, and never matches with them.",
    ),
]


def door_or_exit(seal: Path | None, pool_runbooks: list[Path] | None) -> DoorSettings:
    """How the controller checks reports, or one line and exit (1: a bad seal file or a
    broken runbook)."""
    try:
        sealed = DoorSettings(seal=seal_from_file(seal)) if seal else DoorSettings()
    except SealError as exc:
        typer.echo(f"error: --seal-key-file: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    if not pool_runbooks:
        return sealed
    return DoorSettings(seal=sealed.seal, pool_runbooks=runbooks_or_exit(*pool_runbooks))
