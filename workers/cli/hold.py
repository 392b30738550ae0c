"""`remedy resume-node`: a person hands back a node an abort held (remedy.trust.person_hold), and
remedy's automation may act on it again (registered in __init__.py).

Not `release-hold` (a node's share of its pool's disruption budget) nor `release-gpu` (a
quarantined GPU): this lifts the node's hold for a person. It runs a HoldRelease workflow on the
controller's queue, which lifts the node's mark through the controller's cluster adapter and
keeps who asked; then it nudges the node's ladder if one waits held, which reads the mark again
and climbs for the reports it recorded."""

from __future__ import annotations

from typing import Annotated

import typer
from temporalio.client import Client
from temporalio.service import RPCError

from contract.messages import HOLD_LIFTED, REMEDIATION_STATE
from contract.names import (
    CONTROLLER_TASK_QUEUE,
    HOLD_RELEASE_WORKFLOW,
    hold_release_workflow_id,
    remediation_workflow_id,
)
from remedy.ladder.remediation import Phase, RemediationState
from remedy.trust.person_hold import HoldLift, HoldQuery, NodeHeld
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.controller_answer import Refused, controller_answer
from workers.flags.options import USER, AddressOption, ByOption, TaskQueueOption, node_name


def resume_node(
    node: Annotated[
        str, typer.Argument(help="The node an abort held for a person.", callback=node_name)
    ],
    note: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: AddressOption = None,
    by: ByOption = USER,
    task_queue: TaskQueueOption = CONTROLLER_TASK_QUEUE,
) -> None:
    """Hand back a node that `remedy abort` held for a person: reports for it start ladders
    again, and a ladder that waits held goes on with the reports it recorded. Exit 2 when the
    node is not held."""
    from workers.client import connect_with

    async def resume() -> tuple[NodeHeld, RemediationState | None]:
        client = await connect_with(temporal(address), "cli")
        req = HoldLift(node=node, by=by, note=note, identity=client.identity)
        lifted = await _lift(client, req, task_queue)
        if lifted.hold is None:
            return lifted, None
        ladder = client.get_workflow_handle(remediation_workflow_id(node))
        try:  # asked first: once nudged, the ladder moves on
            state = await REMEDIATION_STATE.ask(ladder)
        except RPCError:
            return lifted, None  # the node never had a ladder, or its history is gone
        if state.phase is not Phase.HELD_FOR_PERSON:
            return lifted, None
        await HOLD_LIFTED.send_if_running(ladder, HoldQuery(node=node))
        return lifted, state

    try:
        lifted, waiting = on_temporal(resume())
    except Refused as exc:
        typer.echo(f"error: {node}: {exc}", err=True)
        raise typer.Exit(2) from None
    if lifted.hold is None:
        typer.echo(f"error: {node}: not held for a person: nothing to hand back", err=True)
        raise typer.Exit(2)
    typer.echo(f"{node}: handed back by {by} (was {lifted.hold.said()})")
    if waiting is None:
        typer.echo("  no report waited: the next one starts a ladder as usual")
        return
    runbook = waiting.runbook.name if waiting.runbook else "its runbook"
    fault = waiting.trigger.headline() if waiting.trigger else "its fault"
    typer.echo(
        f"  its ladder goes on with the {waiting.reports_received} report(s) it recorded: "
        f"{fault} → {runbook}, the fault checked again first (remedy show {node})"
    )


async def _lift(client: Client, req: HoldLift, task_queue: str) -> NodeHeld:
    try:
        return await controller_answer(
            client,
            HOLD_RELEASE_WORKFLOW,
            req,
            workflow_id=hold_release_workflow_id(req.node),
            task_queue=task_queue,
            result_type=NodeHeld,
            under_way="a hand-back of the node is under way",
        )
    except RPCError as exc:
        raise Refused(str(exc)) from None
