"""`remedy approve`, `abort`, `clear`, `resume-pool`, `release-hold` and `resume-job`: an
operator acting on running workflows (registered in __init__.py; `trigger` is in trigger.py).

A decision (approve, abort, clear, resume, release-hold) is a workflow update: the workflow
refuses it when there is nothing to do (one line, ``error: WHAT: why``, exit 2) or answers with
what it did, and records the caller's client identity beside ``--by`` (release-hold has no
``--by``). A workflow from before the updates gets the signal instead, with a note on stderr
(no answer comes back from a signal)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from contract.defs import SignalDef, UpdateDef, UpdateRejected, UpdateUnknown
from contract.messages import (
    ABORT,
    ABORT_LADDER,
    APPROVE,
    APPROVE_RUNG,
    CLEAR,
    CLEAR_LADDER,
    CLOSE_BREAKER,
    GUARD_STATUS,
    LEASE_RELEASE,
    RELEASE_HOLD,
    RELEASE_JOB,
    RESUME_JOB,
    RESUME_POOL,
)
from remedy.signing import Verb
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.options import (
    USER,
    AddressOption,
    ByOption,
    RequiredWhyOption,
    WhyOption,
    node_name,
)
from workers.cli.signing import (
    KeyOption,
    Signer,
    approval_signer,
    key_or_exit,
    note_if_unchecked,
    stop_signer,
)

if TYPE_CHECKING:
    from remedy.remediation import StopResult

P = TypeVar("P")
T = TypeVar("T")
R = TypeVar("R")


def _on_workflow(
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


def _decide(
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
        return _on_workflow(address, workflow_id, send, missing)
    except UpdateRejected as exc:
        typer.echo(f"error: {what}: {exc}", err=True)
        raise typer.Exit(2) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        typer.echo(f"error: {what}: no answer in time; it may still apply (remedy show)", err=True)
        raise typer.Exit(2) from None


def _decide_node(
    address: str | None,
    node: str,
    update: UpdateDef[P, R],
    signal: SignalDef[P],
    request: Callable[[str], P],
    signer: Signer | None,
) -> R | None:
    from contract.names import remediation_workflow_id

    missing = f"{node}: no running remediation"
    workflow_id = remediation_workflow_id(node)
    return _decide(address, workflow_id, update, signal, request, node, missing, signer)


def approve(
    node: Annotated[
        str, typer.Argument(help="The node whose ladder waits for approval.", callback=node_name)
    ],
    address: AddressOption = None,
    rung: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="The rung to approve, counted from 1 as `remedy show` and the Web UI count "
            "(default: the rung waiting now). Refused unless it is the rung waiting, or --ahead.",
        ),
    ] = None,
    ahead: Annotated[
        bool, typer.Option(help="Approve --rung ahead of time, before the ladder reaches it.")
    ] = False,
    by: ByOption = USER,
    note: WhyOption = "",
    key: KeyOption = None,
) -> None:
    """Approve the rung a node's remediation waits for (e.g. a replacement). Exit 2 when
    nothing waits for approval, or the rung is behind the ladder, not the one waiting (without
    --ahead) or approved already."""
    from remedy.decisions import ApproveRequest

    def request(identity: str) -> ApproveRequest:
        return ApproveRequest(by=by, rung_number=rung, ahead=ahead, note=note, identity=identity)

    signer = approval_signer(key_or_exit(key))
    if rung is not None:
        signer = _with_old_form(signer)
    done = _decide_node(address, node, APPROVE_RUNG, APPROVE, request, signer)
    if done is None:
        typer.echo(f"{node}: approval sent by {by}")
        return
    note_if_unchecked(key, node, done.by)
    phase = done.phase.value.replace("_", " ")
    moved = f"ladder now {phase}" if done.moved else f"ladder still {phase} (not acted on yet)"
    ahead_said = " ahead" if done.ahead else ""
    number = done.rung_number or done.rung + 1  # 0: a worker of the release before
    typer.echo(
        f"{node}: approved rung {number} ({done.action.value}){ahead_said} by {done.by}; {moved}"
    )


def _with_old_form(signer: Signer | None) -> Signer:
    """An approval of a named rung also carries the old wire form (``rung``, the index from 0
    in the runbook climbed now): a worker of the release before, which does not read
    ``rung_number``, would otherwise approve the rung waiting instead."""
    from contract.messages import REMEDIATION_STATE
    from remedy.decisions import ApproveRequest

    async def prepared(req: ApproveRequest, handle: WorkflowHandle[Any, Any]) -> ApproveRequest:
        state = await REMEDIATION_STATE.ask(handle)
        req = req.model_copy(update={"rung": state.requested_rung(req)})
        return req if signer is None else await signer(req, handle)

    return prepared


def abort(
    node: Annotated[str, typer.Argument(help="The node whose ladder to stop.", callback=node_name)],
    reason: RequiredWhyOption,
    address: AddressOption = None,
    restore: Annotated[
        bool, typer.Option(help="Also undo remedy's cordon (default: leave the node as it is).")
    ] = False,
    hold: Annotated[
        bool,
        typer.Option(
            help="Hold the node for a person: later reports are recorded and wait until "
            "`remedy resume-node NODE` (--no-hold: the next report starts a ladder).",
        ),
    ] = True,
    by: ByOption = USER,
    key: KeyOption = None,
) -> None:
    """Stop a node's remediation where it stands, and hold the node for a person (no ladder
    acts on it until `remedy resume-node`). An abort after an abort is harmless (exit 0,
    "already stopped"); exit 2 when the ladder finished otherwise or is being cleared."""
    from remedy.decisions import AbortRequest

    def request(identity: str) -> AbortRequest:
        return AbortRequest(by=by, reason=reason, restore=restore, hold=hold, identity=identity)

    signer = stop_signer(key_or_exit(key), Verb.ABORT)
    ended = _aborted_already(address, node)
    if ended:
        typer.echo(f"{node}: already stopped: ladder aborted: {ended}")
        return
    done = _decide_node(address, node, ABORT_LADDER, ABORT, request, signer)
    _say_stopped(node, "abort", by, done)


def _aborted_already(address: str | None, node: str) -> str:
    """The detail of the node's last ladder if it ended aborted (else empty)."""
    from temporalio.client import WorkflowExecutionStatus

    from contract.names import remediation_workflow_id
    from remedy.remediation import Outcome, RemediationResult

    async def ended(client: Client, handle: WorkflowHandle[Any, Any]) -> str:
        if (await handle.describe()).status is not WorkflowExecutionStatus.COMPLETED:
            return ""
        typed = client.get_workflow_handle(handle.id, result_type=RemediationResult)
        result = await typed.result()
        return result.detail if result.outcome is Outcome.ABORTED else ""

    missing = f"{node}: no running remediation"
    return _on_workflow(address, remediation_workflow_id(node), ended, missing)


def clear(
    node: Annotated[str, typer.Argument(help="The node whose fault is gone.", callback=node_name)],
    reason: WhyOption = "",
    address: AddressOption = None,
    by: ByOption = USER,
    key: KeyOption = None,
) -> None:
    """The fault is gone (fixed by hand): end the node's remediation and give the node back
    (uncordon). Exit 2 when it finished or is stopping."""
    from remedy.decisions import ClearRequest

    def request(identity: str) -> ClearRequest:
        return ClearRequest(by=by, reason=reason, identity=identity)

    signer = stop_signer(key_or_exit(key), Verb.CLEAR)
    done = _decide_node(address, node, CLEAR_LADDER, CLEAR, request, signer)
    _say_stopped(node, "clear", by, done)


def _say_stopped(node: str, verb: str, by: str, done: StopResult | None) -> None:
    if done is None:
        typer.echo(f"{node}: {verb} sent by {by}")
    elif done.already:
        ended = f"ladder {done.outcome.value}" if done.outcome else f"still {done.phase.value}"
        typer.echo(f"{node}: already stopped by {done.already} ({ended})")
    elif done.outcome is None:
        typer.echo(f"{node}: {verb} accepted; the ladder is still stopping ({done.phase.value})")
    else:
        typer.echo(f"{node}: ladder {done.outcome.value}: {done.detail}")


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
    from remedy.budget_messages import ResumeRequest

    def request(identity: str) -> ResumeRequest:
        return ResumeRequest(by=by, identity=identity)

    done = _decide(
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
    from remedy.budget import LeaseRelease
    from remedy.budget_messages import HELD_FOR_HUMAN

    def request(_: str) -> LeaseRelease:
        return LeaseRelease(holder=HELD_FOR_HUMAN + node)

    done = _decide(
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

    done = _decide(
        address, workflow_id, RELEASE_JOB, RESUME_JOB, request, ref, f"{ref}: no running guard"
    )
    if done is None:
        typer.echo(f"{ref}: {'stop' if stop else 'resume'} sent by {by}")
    else:
        typer.echo(f"{ref}: {done.phase.value} ({'stopped' if stop else 'resumed'} by {done.by})")
