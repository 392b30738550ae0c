"""`remedy show NODE`: a node's ladder as a timeline, from the running workflow's query or the
closed workflow's result."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus

from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.durations import format_duration
from remedy.remediation import Attempt
from workflows.node_remediation import NodeRemediation


class NodeLadder(BaseModel):
    node: str
    runbook: str | None
    status: str  # the phase while it runs, the outcome once closed
    detail: str = ""
    trigger: str = ""
    attempts: list[Attempt] = []


async def node_ladder(client: Client, node: str) -> NodeLadder:
    handle = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
    status = (await handle.describe()).status
    if status is WorkflowExecutionStatus.RUNNING:
        state = await REMEDIATION_STATE.ask(handle)
        return NodeLadder(
            node=node,
            runbook=state.runbook.name if state.runbook else None,
            status=state.phase.value,
            trigger=state.trigger.headline() if state.trigger else "",
            attempts=state.attempts,
        )
    if status is WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        return NodeLadder(
            node=node,
            runbook=result.runbook,
            status=result.outcome.value,
            detail=result.detail,
            attempts=result.attempts,
        )
    return NodeLadder(node=node, runbook=None, status=status.name.lower() if status else "?")


def timeline(ladder: NodeLadder) -> list[str]:
    lines = [
        f"{ladder.node}: {ladder.status}"
        + (f" — runbook {ladder.runbook}" if ladder.runbook else "")
        + (f", trigger {ladder.trigger}" if ladder.trigger else "")
    ]
    for a in ladder.attempts:
        rung = "  -" if a.rung < 0 else f"{a.rung:>3}"
        took = format_duration(a.finished_at - a.started_at)
        lines.append(
            f"{rung} {a.started_at:%H:%M:%S} {a.action.value:<10} {a.result.value:<18} "
            f"{took:>6}  {a.detail}"
        )
    if ladder.detail:
        lines.append(f"    {ladder.detail}")
    return lines
