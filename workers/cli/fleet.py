"""`remedy status` and `remedy show`: what the fleet and a node's ladder look like now
(registered in __init__.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from temporalio.service import RPCError

from contract.names import FLEET_SCAN_SCHEDULE
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.exits import BAD_INPUT
from workers.flags.options import AddressOption, JsonOption, node_name

if TYPE_CHECKING:
    from workers.status import FleetStatus


def status(
    address: AddressOption = None,
    as_json: JsonOption = False,
    pool: Annotated[str | None, typer.Option(help="Only this pool.")] = None,
    state: Annotated[
        str | None,
        typer.Option(
            help="Only nodes whose state contains this (e.g. tolerating, needs_human, admission); "
            "a word no state contains is refused with the states (exit 1)."
        ),
    ] = None,
    waiting: Annotated[
        bool,
        typer.Option("--awaiting-approval", help="Only nodes whose ladder waits for an approval."),
    ] = False,
    schedule: Annotated[
        str, typer.Option(help="The fleet-scan schedule id.")
    ] = FLEET_SCAN_SCHEDULE,
    blocking: Annotated[
        bool,
        typer.Option(
            "--blocking",
            help="Who blocks whom instead: each pool's holders (node, phase, since, what each "
            "waits for, the commands that free it), its waiters in the order served, and its "
            "breaker, with the time of the read.",
        ),
    ] = False,
    jobs: Annotated[
        bool,
        typer.Option(
            "--jobs",
            help="Guarded jobs instead: each guard's phase, the job's goodput, size and end, "
            "the time lost to platform, application and unknown failures, and job success.",
        ),
    ] = False,
) -> None:
    """The fleet: each pool's counts, leases and storm breaker (from the latest fleet scan), then
    every node in remediation, in admission or left for a human — state, fault, runbook, rung,
    since when, waiting for approval or not. Exit 0: shown; 3: a pool's breaker or the cluster's
    is tripped, or the latest scan saw many agents silent at once; 2: nothing to show (no scan
    and no such node); 1: a --pool remedy does not know, or a --state no node can be in."""
    from workers.client import connect_with
    from workers.known_pools import UnknownPool, check_pool
    from workers.status import NodeFilter, NoScanYet, fleet_status, why_not_state
    from workers.status_table import show_status

    if jobs:
        _job_status(address, as_json)
    if blocking:
        _blocking_status(address, as_json, schedule, pool)
    if state is not None and (why := why_not_state(state)):
        typer.echo(f"error: {why}", err=True)
        raise typer.Exit(BAD_INPUT)
    only = NodeFilter(pool=pool, state=state, awaiting_approval=waiting)

    async def read() -> FleetStatus:
        client = await connect_with(temporal(address), "cli")
        if pool is not None:
            await check_pool(client, pool, schedule)
        return await fleet_status(client, schedule, only)

    try:
        shown = on_temporal(read())
    except UnknownPool as exc:
        typer.echo(f"error: --pool: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except (NoScanYet, RPCError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(shown.model_dump_json(indent=2))
    else:
        show_status(shown)
    raise typer.Exit(3 if shown.breaker_tripped else 0)


def _blocking_status(address: str | None, as_json: bool, schedule: str, pool: str | None) -> None:
    """Exit 0: shown; 3: a breaker is tripped; 2: no pool known (no scan, no ladder, no
    --pool)."""
    from workers.blocking_status import PoolsBlocking, pools_blocking, render
    from workers.client import connect_with
    from workers.known_pools import UnknownPool, check_pool
    from workers.status import NoScanYet

    async def read() -> PoolsBlocking:
        client = await connect_with(temporal(address), "cli")
        if pool is not None:
            await check_pool(client, pool, schedule, cluster=True)
        return await pools_blocking(client, schedule, pool)

    try:
        shown = on_temporal(read())
    except UnknownPool as exc:
        typer.echo(f"error: --pool: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except (NoScanYet, RPCError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(shown.model_dump_json(indent=2) if as_json else "\n".join(render(shown)))
    raise typer.Exit(3 if shown.tripped else 0)


def _job_status(address: str | None, as_json: bool) -> None:
    """Exit 0: shown; 3: a guard holds a job for a human; 2: no guarded job."""
    import json

    from workers.client import connect_with
    from workers.job_status import HEADERS, JobRow, held, job_rows, job_success, table_rows
    from workers.tables import show as show_table

    async def read() -> list[JobRow]:
        return await job_rows(await connect_with(temporal(address), "cli"))

    try:
        rows = on_temporal(read())
    except RPCError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if not rows:
        typer.echo("no guarded job", err=True)
        raise typer.Exit(2)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        show_table(HEADERS, table_rows(rows), title="guarded jobs")
        typer.echo(job_success(rows))
        for job in held(rows):
            namespace, name = job.split("/", 1)
            typer.echo(f"HELD {job}: remedy resume-job {name} --namespace {namespace} [--stop]")
    raise typer.Exit(3 if held(rows) else 0)


def show(
    node: Annotated[str, typer.Argument(help="The node.", callback=node_name)],
    address: AddressOption = None,
    as_json: JsonOption = False,
) -> None:
    """The node's ladder so far as a timeline: rung, time, action, result, duration, evidence.
    Exit 2 when the node never had a remediation."""
    from workers.client import connect_with
    from workers.show import NodeLadder, node_ladder, timeline

    async def read() -> NodeLadder:
        return await node_ladder(await connect_with(temporal(address), "cli"), node)

    try:
        ladder = on_temporal(read())
    except RPCError as exc:
        typer.echo(f"error: {node}: no remediation found ({exc})", err=True)
        raise typer.Exit(2) from None
    typer.echo(ladder.model_dump_json(indent=2) if as_json else "\n".join(timeline(ladder)))
