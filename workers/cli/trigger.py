"""`remedy trigger`: start a node's remediation by hand, or join the one running, and say where
the ladder stands once it took the finding (registered in __init__.py).

A ladder whose node the cluster does not have ends ``node_gone`` at once (its cordon finds no
node): the command then says so and exits 2 rather than reporting a ladder that does nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from contract.messages import REMEDIATION_STATE
from contract.names import CONTROLLER_TASK_QUEUE
from remedy.core.models import NodeRef
from remedy.ladder.remediation import Outcome, Phase
from workers.cli.common import on_temporal, runbook_or_exit
from workers.cli.connection import temporal
from workers.cli.exits import BAD_INPUT
from workers.cli.signing import KeyOption, key_or_exit
from workers.flags.options import (
    DEFAULT_RUNBOOKS,
    USER,
    AddressOption,
    ByOption,
    RunbooksOption,
    TaskQueueOption,
    node_name,
    operator_text_option,
)
from workers.stall_watch import look

if TYPE_CHECKING:
    from remedy.ladder.remediation import RemediationResult
    from workflows.node_remediation import NodeRemediation

# How long the command waits, in real time, for the ladder to take the finding (its cordon,
# when the runbook cordons) before it answers with the phase it sees.
TAKES_WITHIN_S = 30.0
LOOK_EVERY_S = 0.25
ASK_WITHIN = timedelta(seconds=2)  # a query no worker answers (no controller yet) gives up


def trigger(
    node: Annotated[str, typer.Argument(help="The node to remediate.", callback=node_name)],
    runbook: Annotated[str, typer.Option(help="The runbook to climb, by name.")],
    reason: Annotated[
        str,
        typer.Option(
            help="Why (the finding's evidence; one line, at most 500 characters; secrets in it "
            "are redacted).",
            callback=operator_text_option,
        ),
    ] = "by hand",
    pool: Annotated[str, typer.Option(help="The node's pool (its disruption budget).")] = "default",
    address: AddressOption = None,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    task_queue: TaskQueueOption = CONTROLLER_TASK_QUEUE,
    node_task_queue: Annotated[
        str | None, typer.Option(help="The node agent's queue (default: remedy-node/<node>).")
    ] = None,
    by: ByOption = USER,
    key: KeyOption = None,
) -> None:
    """Start a remediation by hand, or join the one running on the node; then wait (up to 30 s)
    for the ladder to take the finding and print its phase. Exit 1 when no runbook or no pool
    remedy knows has that name (nothing is started), 2 when the cluster has no such node (the
    ladder ended node_gone)."""
    from datetime import UTC, datetime

    from contract.names import node_task_queue as agent_queue
    from contract.names import remediation_workflow_id
    from remedy.core.models import Finding, Severity
    from remedy.ladder.intake import by_operator
    from remedy.ladder.remediation import FindingReport
    from workers.client import connect_with, report_finding
    from workers.known_pools import UnknownPool, check_pool

    chosen = runbook_or_exit(runbooks, runbook)
    signing = key_or_exit(key)
    finding = Finding(
        node=node,
        check="manual",
        reason="ManualTrigger",
        severity=Severity.CRITICAL,
        evidence=reason,
        observed_at=datetime.now(UTC),
    )

    async def start() -> tuple[str, Stand]:
        client = await connect_with(temporal(address), "cli")
        await check_pool(client, pool)  # a typo must not start a budget and cordon the node
        # Signed for the node's ladder (no run yet): the controller takes it from an operator
        # of its keyring, or from anyone where it has none (remedy.ladder.intake).
        ladder = remediation_workflow_id(node)
        sent = by_operator(
            FindingReport(finding=finding, runbook=chosen), ladder, by, signing, datetime.now(UTC)
        )
        handle = await report_finding(
            client,
            NodeRef(name=node, pool=pool),
            sent,
            node_task_queue=node_task_queue or agent_queue(node),
            task_queue=task_queue,
        )
        return handle.id, await taken(client, handle, TAKES_WITHIN_S)

    try:
        workflow_id, stand = on_temporal(start())
    except UnknownPool as exc:
        typer.echo(f"error: --pool: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except RPCError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if stand.outcome is Outcome.NODE_GONE:
        typer.echo(
            f"error: {node}: the cluster has no node {node} (ladder ended node_gone)", err=True
        )
        raise typer.Exit(2)
    typer.echo(f"{node}: {chosen.name} → {workflow_id} ({stand.says()})")


class Stand(NamedTuple):
    """Where a ladder stands: its phase (None: it has not taken its finding yet, ``detail``
    says why), and how it ended if it did."""

    phase: Phase | None
    outcome: Outcome | None = None
    detail: str = ""

    def says(self) -> str:
        if self.outcome is not None:
            return f"ended {self.outcome.value}: {self.detail}"
        if self.phase is None:
            return f"{Phase.WAITING.value}: {self.detail}"
        return self.phase.value if self.phase is not Phase.DONE else f"ended: {self.detail}"


async def taken(
    client: Client, handle: WorkflowHandle[NodeRemediation, RemediationResult], within_s: float
) -> Stand:
    """Where the ladder stands once it left waiting_for_finding, or ended (a ladder the
    command joined left it long ago). Its phase is None when no controller polls its queue
    (the finding waits in the workflow until one does), or it still waits after
    ``within_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        described = await handle.describe()
        if described.status is not WorkflowExecutionStatus.RUNNING:
            return await _ended(handle)
        if not await _polled(client, described.task_queue):
            return Stand(None, detail=f"no controller polls {described.task_queue} yet")
        try:
            state = await REMEDIATION_STATE.ask(handle, rpc_timeout=ASK_WITHIN)
        except (RPCError, WorkflowQueryFailedError):
            state = None  # not answered yet: look again
        if state is not None and (state.outcome is not None or state.phase is not Phase.WAITING):
            return Stand(state.phase, state.outcome, state.outcome_detail)
        if loop.time() >= deadline:
            return Stand(None, detail=f"still, after {within_s:g}s")
        await asyncio.sleep(LOOK_EVERY_S)


async def _polled(client: Client, queue: str) -> bool:
    """Whether a worker polled the workflow task queue lately (the server's own record; a
    server that keeps none, the time-skipping test server, is taken at the ladder's word)."""
    try:
        return (await look(client, queue)).last_poll is not None
    except RPCError as err:
        if err.status is not RPCStatusCode.UNIMPLEMENTED:
            raise
        return True


async def _ended(handle: WorkflowHandle[NodeRemediation, RemediationResult]) -> Stand:
    try:
        result = await handle.result()
    except WorkflowFailureError as err:  # failed or terminated: no outcome to say
        return Stand(Phase.DONE, detail=f"the workflow did not complete ({err.cause or err})")
    return Stand(Phase.DONE, result.outcome, result.detail)
