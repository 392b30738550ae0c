"""`remedy resume-pool`, `release-hold` and `resume-job`: an operator giving back what remedy
holds, a pool's breaker, a node's share of its budget, a guarded job (registered in
__init__.py; each a workflow update sent as decide.py says)."""

from __future__ import annotations

from typing import Annotated

import typer
from temporalio.service import RPCError

from contract.messages import (
    CLOSE_BREAKER,
    GUARD_STATUS,
    LEASE_RELEASE,
    RELEASE_HOLD,
    RELEASE_JOB,
    RESUME_JOB,
    RESUME_POOL,
)
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.decide import decide
from workers.flags.options import USER, AddressOption, ByOption, node_name


def resume_pool(
    pool: Annotated[
        str, typer.Argument(help="The node pool whose breaker to reset (_cluster: the cluster's).")
    ],
    address: AddressOption = None,
    by: ByOption = USER,
) -> None:
    """Close a pool's breaker: the cordons it held go on, and disruptive work resumes within
    the budget. Exit 2 when the breaker is not tripped."""
    from contract.names import budget_workflow_id
    from remedy.disruption.budget_messages import ResumeRequest

    def request(identity: str) -> ResumeRequest:
        return ResumeRequest(by=by, identity=identity)

    done = decide(
        address,
        budget_workflow_id(pool),
        CLOSE_BREAKER,
        RESUME_POOL,
        request,
        f"pool {pool}",
        f"pool {pool}: no disruption budget",
    )
    if done is None:
        typer.echo(f"pool {pool}: resume sent by {by}")
    else:
        typer.echo(
            f"pool {pool}: breaker closed ({done.note}); "
            f"{done.holders} leases held, {done.waiting} waiting"
        )


def release_hold(
    node: Annotated[
        str,
        typer.Argument(help="The node a ladder left cordoned for a person.", callback=node_name),
    ],
    pool: Annotated[str, typer.Option(help="The node's pool.")] = "default",
    address: AddressOption = None,
) -> None:
    """Stop counting a node left for a person against its pool's disruption budget (it ends
    by itself when remedy's cordon goes from the node). Exit 2 when the node is not held for
    a person (the answer lists what holds the pool's share)."""
    from contract.names import budget_workflow_id
    from remedy.disruption.budget import LeaseRelease
    from remedy.disruption.budget_messages import HELD_FOR_HUMAN

    def request(_: str) -> LeaseRelease:
        return LeaseRelease(holder=HELD_FOR_HUMAN + node)

    done = decide(
        address,
        budget_workflow_id(pool),
        RELEASE_HOLD,
        LEASE_RELEASE,
        request,
        f"pool {pool}",
        f"pool {pool}: no disruption budget",
    )
    if done is None:
        typer.echo(f"pool {pool}: release of {node} sent")
    else:
        typer.echo(
            f"pool {pool}: {node} no longer held; {len(done.held)} held for a person, "
            f"{done.holders} leases held, {done.waiting} waiting"
        )


def resume_job(
    job: Annotated[
        str,
        typer.Argument(
            help="The guarded job whose guard holds it: NAME, or NAMESPACE/NAME as "
            "`status --jobs` prints it."
        ),
    ],
    namespace: Annotated[str, typer.Option(help="The job's namespace.")] = "default",
    address: AddressOption = None,
    stop: Annotated[
        bool, typer.Option("--stop", help="Give up on the job instead of restarting it.")
    ] = False,
    by: ByOption = USER,
) -> None:
    """Let a job guard that holds a job for a human restart it (or stop, with --stop).
    Exit 2 when no guard runs for the job, or its guard holds nothing."""
    from contract.names import job_guard_workflow_id
    from remedy.attribution.guard import GuardPhase, ResumeRequest
    from workers.client import connect_with

    namespace, _, job = job.rpartition("/") if "/" in job else (namespace, "", job)
    ref = f"job {namespace}/{job}"
    workflow_id = job_guard_workflow_id(namespace, job)

    async def phase() -> GuardPhase:  # a closed guard still answers: say how it ended
        client = await connect_with(temporal(address), "cli")
        return (await GUARD_STATUS.ask(client.get_workflow_handle(workflow_id))).phase

    try:
        now = on_temporal(phase())
    except RPCError as exc:
        typer.echo(f"error: {ref}: no running guard ({exc})", err=True)
        raise typer.Exit(2) from None
    if now is not GuardPhase.HELD:
        typer.echo(f"error: {ref}: the guard is {now.value}, not held: nothing to resume", err=True)
        raise typer.Exit(2)

    def request(identity: str) -> ResumeRequest:
        return ResumeRequest(by=by, stop=stop, identity=identity)

    done = decide(
        address, workflow_id, RELEASE_JOB, RESUME_JOB, request, ref, f"{ref}: no running guard"
    )
    if done is None:
        typer.echo(f"{ref}: {'stop' if stop else 'resume'} sent by {by}")
    else:
        typer.echo(f"{ref}: {done.phase.value} ({'stopped' if stop else 'resumed'} by {done.by})")
