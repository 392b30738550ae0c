"""`remedy approve`, `abort`, `trigger`, `resume-pool`, `release-hold` and `resume-job`: an
operator acting on running workflows (registered in __init__.py)."""

from __future__ import annotations

from typing import Annotated, TypeVar

import typer
from temporalio.service import RPCError

from contract.defs import SignalDef
from contract.messages import (
    ABORT,
    APPROVE,
    GUARD_STATUS,
    LEASE_RELEASE,
    RESUME_JOB,
    RESUME_POOL,
)
from contract.names import CONTROLLER_TASK_QUEUE
from remedy.models import NodeRef
from workers.cli.common import on_temporal, runbook_or_exit
from workers.cli.connection import temporal
from workers.cli.options import (
    DEFAULT_RUNBOOKS,
    USER,
    AddressOption,
    ByOption,
    RunbooksOption,
)

P = TypeVar("P")


def _signal(
    address: str | None, workflow_id: str, signal: SignalDef[P], arg: P, missing: str
) -> None:
    """Signal a running workflow; exit 2 with ``missing`` when there is none."""
    from workers.client import connect_with

    async def send() -> None:
        client = await connect_with(temporal(address), "cli")
        await signal.send(client.get_workflow_handle(workflow_id), arg)

    try:
        on_temporal(send())
    except RPCError as exc:
        typer.echo(f"error: {missing} ({exc})", err=True)
        raise typer.Exit(2) from None


def _signal_node(address: str | None, node: str, signal: SignalDef[P], arg: P) -> None:
    """Signal the node's running remediation; exit 2 when it has none."""
    from contract.names import remediation_workflow_id

    _signal(address, remediation_workflow_id(node), signal, arg, f"{node}: no running remediation")


def approve(
    node: Annotated[str, typer.Argument(help="The node whose ladder waits for approval.")],
    address: AddressOption = None,
    rung: Annotated[
        int | None,
        typer.Option(help="Approve this rung ahead of time (default: the rung waiting now)."),
    ] = None,
    by: ByOption = USER,
    note: Annotated[str, typer.Option(help="Why (recorded).")] = "",
) -> None:
    """Approve the rung a node's remediation waits for (e.g. a replacement)."""
    from remedy.remediation import ApproveRequest

    _signal_node(address, node, APPROVE, ApproveRequest(by=by, rung=rung, note=note))
    typer.echo(f"{node}: approved by {by}")


def abort(
    node: Annotated[str, typer.Argument(help="The node whose ladder to stop.")],
    reason: Annotated[str, typer.Option(help="Why (recorded; required).")],
    address: AddressOption = None,
    restore: Annotated[
        bool, typer.Option(help="Also undo remedy's cordon (default: leave the node as it is).")
    ] = False,
    by: ByOption = USER,
) -> None:
    """Stop a node's remediation where it stands."""
    from remedy.remediation import AbortRequest

    _signal_node(address, node, ABORT, AbortRequest(by=by, reason=reason, restore=restore))
    typer.echo(f"{node}: abort sent by {by}")


def trigger(
    node: Annotated[str, typer.Argument(help="The node to remediate.")],
    runbook: Annotated[str, typer.Option(help="The runbook to climb, by name.")],
    reason: Annotated[str, typer.Option(help="Why (the finding's evidence).")] = "by hand",
    pool: Annotated[str, typer.Option(help="The node's pool (its disruption budget).")] = "default",
    address: AddressOption = None,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    task_queue: Annotated[
        str, typer.Option(help="The controller's task queue.")
    ] = CONTROLLER_TASK_QUEUE,
    node_task_queue: Annotated[
        str | None, typer.Option(help="The node agent's queue (default: remedy-node/<node>).")
    ] = None,
) -> None:
    """Start a remediation by hand, or join the one running on the node."""
    from datetime import UTC, datetime

    from contract.names import node_task_queue as agent_queue
    from remedy.models import Finding, Severity
    from remedy.remediation import FindingReport
    from workers.client import connect_with, report_finding

    chosen = runbook_or_exit(runbooks, runbook)
    finding = Finding(
        node=node,
        check="manual",
        reason="ManualTrigger",
        severity=Severity.CRITICAL,
        evidence=reason,
        observed_at=datetime.now(UTC),
    )

    async def start() -> str:
        handle = await report_finding(
            await connect_with(temporal(address), "cli"),
            NodeRef(name=node, pool=pool),
            FindingReport(finding=finding, runbook=chosen),
            node_task_queue=node_task_queue or agent_queue(node),
            task_queue=task_queue,
        )
        return handle.id

    try:
        workflow_id = on_temporal(start())
    except RPCError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{node}: {chosen.name} → {workflow_id}")


def resume_pool(
    pool: Annotated[str, typer.Argument(help="The node pool whose breaker to reset.")],
    address: AddressOption = None,
    by: ByOption = USER,
) -> None:
    """Close a pool's storm breaker: disruptive work resumes within the budget."""
    from contract.names import budget_workflow_id
    from remedy.budget import ResumeRequest

    _signal(
        address,
        budget_workflow_id(pool),
        RESUME_POOL,
        ResumeRequest(by=by),
        f"pool {pool}: no disruption budget",
    )
    typer.echo(f"pool {pool}: resume sent by {by}")


def release_hold(
    node: Annotated[str, typer.Argument(help="The node a ladder left cordoned for a person.")],
    pool: Annotated[str, typer.Option(help="The node's pool.")] = "default",
    address: AddressOption = None,
) -> None:
    """Stop counting a node left for a person against its pool's disruption budget (it ends
    by itself when remedy's cordon goes from the node)."""
    from contract.names import budget_workflow_id
    from remedy.budget import HELD_FOR_HUMAN, LeaseRelease

    _signal(
        address,
        budget_workflow_id(pool),
        LEASE_RELEASE,
        LeaseRelease(holder=HELD_FOR_HUMAN + node),
        f"pool {pool}: no disruption budget",
    )
    typer.echo(f"pool {pool}: {node} no longer held")


def resume_job(
    job: Annotated[str, typer.Argument(help="The guarded job whose guard holds it.")],
    namespace: Annotated[str, typer.Option(help="The job's namespace.")] = "default",
    address: AddressOption = None,
    stop: Annotated[
        bool, typer.Option("--stop", help="Give up on the job instead of restarting it.")
    ] = False,
    by: ByOption = USER,
) -> None:
    """Let a job guard that holds a job for a human restart it (or stop, with --stop).
    Exit 2 when no guard runs for the job, or its guard holds nothing (a resume then would be
    ignored)."""
    from contract.names import job_guard_workflow_id
    from remedy.attribution.guard import GuardPhase, ResumeRequest
    from workers.client import connect_with

    workflow_id = job_guard_workflow_id(namespace, job)

    async def phase() -> GuardPhase:
        client = await connect_with(temporal(address), "cli")
        return (await GUARD_STATUS.ask(client.get_workflow_handle(workflow_id))).phase

    try:
        now = on_temporal(phase())
    except RPCError as exc:
        typer.echo(f"error: job {namespace}/{job}: no running guard ({exc})", err=True)
        raise typer.Exit(2) from None
    if now is not GuardPhase.HELD:
        typer.echo(
            f"error: job {namespace}/{job} is {now.value}, not held: nothing to resume", err=True
        )
        raise typer.Exit(2)
    _signal(
        address,
        workflow_id,
        RESUME_JOB,
        ResumeRequest(by=by, stop=stop),
        f"job {namespace}/{job}: no running guard",
    )
    typer.echo(f"job {namespace}/{job}: {'stop' if stop else 'resume'} sent by {by}")
