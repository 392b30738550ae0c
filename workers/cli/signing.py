"""Operators' keys: `remedy keys generate`, the `--key` that `approve`, `abort` and `clear`
sign with, and the controller's `--keyring` (the format: remedy/trust/signing.py,
docs/operations.md).

A decision is signed over the workflow's id and current run, the verb, the rung and runbook
epoch an approval is for (read from the workflow when not given), its note or reason, and the
time; the ladder checks it against the controller's keyring (workflows/operator_keys.py)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from remedy.trust.signing import (
    Decision,
    Keyring,
    SigningError,
    Verb,
    fingerprint,
    load_private_key,
    parse_keyring,
    private_key_bytes,
    public_blob,
    sign,
)
from workers.cli.exits import BAD_INPUT

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from temporalio.client import WorkflowHandle

    from remedy.trust.decisions import AbortRequest, ApproveRequest, ClearRequest

KeyOption = Annotated[
    Path | None,
    typer.Option(
        "--key",
        envvar="REMEDY_KEY",
        help="Sign the decision with this Ed25519 key file (OpenSSH or PEM; env REMEDY_KEY). "
        "Required where the controller has a keyring; without one the decision is recorded "
        "unverified.",
    ),
]
T = TypeVar("T")
Signer = Callable[[Any, "WorkflowHandle[Any, Any]"], Awaitable[Any]]

app = typer.Typer(help="Operators' signing keys (see docs/operations.md).", no_args_is_help=True)


@app.command()
def generate(
    out: Annotated[Path, typer.Argument(help="The private key file to write (and OUT.pub).")],
    name: Annotated[str, typer.Option(help="The operator's name in the keyring.")],
) -> None:
    """Make an Ed25519 key pair: OUT (private, mode 0600) and OUT.pub (the keyring line)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if out.exists():
        typer.echo(f"error: {out} exists: not overwritten", err=True)
        raise typer.Exit(BAD_INPUT)
    private = Ed25519PrivateKey.generate()
    line = f"ssh-ed25519 {public_blob(private)} {name}"
    try:
        parse_keyring(line, "the new key")  # the name as a keyring takes it
    except SigningError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    try:  # both files or neither: a .pub it cannot write takes the private key back
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(private_key_bytes(private))
        try:
            Path(f"{out}.pub").write_text(line + "\n")
        except OSError:
            out.unlink()
            raise
    except OSError as exc:
        typer.echo(f"error: {exc.filename}: {exc.strerror}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    typer.echo(f"{out}: private key; {out}.pub: add its line to the controller's keyring:")
    typer.echo(line)
    typer.echo(f"fingerprint {fingerprint(public_blob(private))}")


def key_or_exit(path: Path | None) -> Ed25519PrivateKey | None:
    """The operator's key, or one line and exit 1."""
    return (
        None
        if path is None
        else _read_or_exit(path, lambda p: load_private_key(p.read_bytes(), str(p)))
    )


def keyring_or_exit(path: Path | None) -> Keyring | None:
    """The controller's keyring, or one line (every problem, with its line) and exit 1."""
    return (
        None
        if path is None
        else _read_or_exit(path, lambda p: parse_keyring(p.read_text(), str(p)))
    )


def _read_or_exit(path: Path, load: Callable[[Path], T]) -> T:
    try:
        return load(path)
    except OSError as exc:
        typer.echo(f"error: {path}: {exc.strerror}", err=True)
    except SigningError as exc:
        typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(BAD_INPUT)


def note_if_unchecked(key: Path | None, what: str, by: str) -> None:
    """A signed decision the workflow recorded unverified: the controller has no keyring of
    operators' keys, so the signature was not checked. Said, not dropped silently."""
    from remedy.core.models import UNVERIFIED

    if key is not None and by.endswith(UNVERIFIED):
        typer.echo(
            f"note: {what}: signed with {key}, but the controller has no keyring of operators' "
            f"keys: the signature was not checked and the decision is recorded {UNVERIFIED}",
            err=True,
        )


def approval_signer(key: Ed25519PrivateKey | None) -> Signer | None:
    """Signs an approval for the rung it names, else the rung the ladder is at now, by its
    number (from 1; remedy.core.numbering)."""
    if key is None:
        return None

    async def signed(req: ApproveRequest, handle: WorkflowHandle[Any, Any]) -> ApproveRequest:
        from contract.messages import REMEDIATION_STATE

        state = await REMEDIATION_STATE.ask(handle)
        number = state.number_of(state.requested_rung(req))  # signed as people count it
        decision = await _decision(
            handle, Verb.APPROVE, req.note, rung_number=number, epoch=state.epoch
        )
        return req.model_copy(update={"signature": sign(key, decision)})

    return signed


def stop_signer(key: Ed25519PrivateKey | None, verb: Verb) -> Signer | None:
    """Signs an abort or a clear (its reason, and an abort's --restore and --no-hold)."""
    if key is None:
        return None

    async def signed(
        req: AbortRequest | ClearRequest, handle: WorkflowHandle[Any, Any]
    ) -> AbortRequest | ClearRequest:
        restore = bool(getattr(req, "restore", False))
        no_hold = not getattr(req, "hold", True)
        decision = await _decision(handle, verb, req.reason, restore=restore, no_hold=no_hold)
        return req.model_copy(update={"signature": sign(key, decision)})

    return signed


async def _decision(
    handle: WorkflowHandle[Any, Any], verb: Verb, text: str, **fields: Any
) -> Decision:
    run_id = (await handle.describe()).run_id
    return Decision(
        workflow_id=handle.id, run_id=run_id, verb=verb, text=text, at=datetime.now(UTC), **fields
    )
