"""How an operator's decision reaches a running workflow (approve, abort, clear, resume,
release-hold, resume-job): a workflow update. The workflow refuses it when there is nothing to
do (one line, ``error: WHAT: why``, exit 2) or answers with what it did, and records the
caller's client identity beside ``--by`` (release-hold has no ``--by``). A workflow from before
the updates gets the signal instead, with a note on stderr (no answer comes back from a
signal)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import typer
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from contract.defs import SignalDef, UpdateDef, UpdateRejected, UpdateUnknown
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.signing import Signer

P = TypeVar("P")
T = TypeVar("T")
R = TypeVar("R")


def on_workflow(
    address: str | None,
    workflow_id: str,
    act: Callable[[Client, WorkflowHandle[Any, Any]], Awaitable[T]],
    missing: str,
) -> T:
    """Run ``act`` on a workflow's handle; exit 2 with ``missing`` when no such workflow runs."""
    from workers.client import connect_with

    async def run() -> T:
        client = await connect_with(temporal(address), "cli")
        return await act(client, client.get_workflow_handle(workflow_id))

    try:
        return on_temporal(run())
    except RPCError as exc:
        typer.echo(f"error: {missing} ({exc})", err=True)
        raise typer.Exit(2) from None


def decide(
    address: str | None,
    workflow_id: str,
    update: UpdateDef[P, R],
    signal: SignalDef[P],
    request: Callable[[str], P],
    what: str,
    missing: str,
    signer: Signer | None = None,
) -> R | None:
    """Send ``request`` (made with the client's identity, signed by ``signer``) as the update
    and return its answer: exit 2 with ``error: WHAT: reason`` when the workflow refuses it,
    with ``missing`` when no such workflow runs. None: the workflow predates the update and
    got the signal."""

    async def send(client: Client, handle: WorkflowHandle[Any, Any]) -> R | None:
        payload = request(client.identity)
        if signer is not None:
            payload = await signer(payload, handle)
        try:
            return await update.execute(handle, payload)
        except UpdateUnknown:
            typer.echo(
                f"note: {what}: its workflow predates the {update.name} update; "
                "sent as a signal instead (no answer)",
                err=True,
            )
            await signal.send(handle, payload)
            return None

    try:
        return on_workflow(address, workflow_id, send, missing)
    except UpdateRejected as exc:
        typer.echo(f"error: {what}: {exc}", err=True)
        raise typer.Exit(2) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        typer.echo(f"error: {what}: no answer in time; it may still apply (remedy show)", err=True)
        raise typer.Exit(2) from None
