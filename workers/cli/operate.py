"""`remedy approve`, `abort` and `clear`: an operator deciding on a node's running ladder
(registered in __init__.py; `resume-pool`, `release-hold` and `resume-job` are in resume.py,
`trigger` in trigger.py). Each decision is a workflow update sent as decide.py says."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from temporalio.client import Client, WorkflowHandle

from contract.defs import SignalDef, UpdateDef
from contract.messages import (
    ABORT,
    ABORT_LADDER,
    APPROVE,
    APPROVE_RUNG,
    CLEAR,
    CLEAR_LADDER,
)
from remedy.trust.signing import Verb
from workers.cli.decide import decide, on_workflow
from workers.cli.signing import (
    KeyOption,
    Signer,
    approval_signer,
    key_or_exit,
    note_if_unchecked,
    stop_signer,
)
from workers.flags.options import (
    USER,
    AddressOption,
    ByOption,
    RequiredWhyOption,
    WhyOption,
    node_name,
)

if TYPE_CHECKING:
    from remedy.ladder.remediation import StopResult

P = TypeVar("P")
R = TypeVar("R")


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
    return decide(address, workflow_id, update, signal, request, node, missing, signer)


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
    from remedy.trust.decisions import ApproveRequest

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
    from remedy.trust.decisions import ApproveRequest

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
    from remedy.trust.decisions import AbortRequest

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
    from remedy.ladder.remediation import Outcome, RemediationResult

    async def ended(client: Client, handle: WorkflowHandle[Any, Any]) -> str:
        if (await handle.describe()).status is not WorkflowExecutionStatus.COMPLETED:
            return ""
        typed = client.get_workflow_handle(handle.id, result_type=RemediationResult)
        result = await typed.result()
        return result.detail if result.outcome is Outcome.ABORTED else ""

    missing = f"{node}: no running remediation"
    return on_workflow(address, remediation_workflow_id(node), ended, missing)


def clear(
    node: Annotated[str, typer.Argument(help="The node whose fault is gone.", callback=node_name)],
    reason: WhyOption = "",
    address: AddressOption = None,
    by: ByOption = USER,
    key: KeyOption = None,
) -> None:
    """The fault is gone (fixed by hand): end the node's remediation and give the node back
    (uncordon). Exit 2 when it finished or is stopping."""
    from remedy.trust.decisions import ClearRequest

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
