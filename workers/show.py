"""`remedy show NODE`: a node's ladder as a timeline, from the running workflow's query or the
closed workflow's result: each attempt, and each approval with who gave it (the keyring's name
and key, or the name and client identity the caller gave, unverified), and the decisions sent
as signals that the running ladder refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecutionStatus

from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.core.display import visible
from remedy.core.durations import format_duration
from remedy.core.numbering import first_number, rung_label, rung_number
from remedy.disruption.blocking import place_in_line
from remedy.ladder.describe import approval_deadline, at
from remedy.ladder.remediation import Attempt, Escalation, Phase
from remedy.ladder.under_way import UnderWay, Waiting, under_way, waiting
from remedy.trust.decisions import Approval, Refusal
from remedy.trust.person_hold import held_note
from remedy.trust.signing import Verb
from workers.blocking_status import pools_blocking
from workflows.node_remediation import NodeRemediation

ZERO = timedelta(0)


class NodeLadder(BaseModel):
    node: str
    runbook: str | None
    status: str  # the phase while it runs, the outcome once closed
    since: datetime | None = None  # when the phase began (workflow time)
    deadline: datetime | None = None  # when the approval waited for runs out
    read_at: datetime | None = None  # the caller's clock at the read: "4m ago", "in 8h"
    detail: str = ""
    trigger: str = ""
    attempts: list[Attempt] = []
    approvals: list[Approval] = []
    escalations: list[Escalation] = []
    # Messages the ladder refused (decisions sent as signals, what its door turned away): the
    # latest kept, and how many in all.
    refused: list[Refusal] = []
    refusals: int = 0
    sent_by: str = ""  # who sent the report that started it
    # Waiting for a lease: its place in line and the holders ahead (the budget's answer).
    in_line: str = ""
    now: UnderWay | None = None  # the rung under way (being verified, …) of a running ladder
    waiting: list[Waiting] = []  # the faults waiting their turn, the next first


async def node_ladder(client: Client, node: str) -> NodeLadder:
    handle = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
    status = (await handle.describe()).status
    if status is WorkflowExecutionStatus.RUNNING:
        state = await REMEDIATION_STATE.ask(handle)
        return NodeLadder(
            node=node,
            runbook=state.runbook.name if state.runbook else None,
            status=state.phase.value,
            since=state.phase_since,
            deadline=approval_deadline(state),
            read_at=datetime.now(UTC),
            trigger=state.trigger.headline() if state.trigger else "",
            attempts=state.attempts,
            approvals=state.approvals,
            escalations=state.escalations,
            refused=state.refused,
            refusals=state.refusals,
            sent_by=state.sent_by,
            now=under_way(state),
            waiting=waiting(state),
            detail=held_note(state.held, node, state.reports_received) if state.held else "",
            in_line=(
                await _in_line(client, node, state.node.pool)
                if state.phase is Phase.AWAITING_LEASE
                else ""
            ),
        )
    if status is WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
        return NodeLadder(
            node=node,
            runbook=result.runbook,
            status=result.outcome.value,
            detail=result.detail,
            attempts=result.attempts,
            approvals=result.approvals,
            escalations=result.escalations,
            refused=result.refused,
            refusals=result.refusals,
            sent_by=result.sent_by,
        )
    return NodeLadder(node=node, runbook=None, status=status.name.lower() if status else "?")


async def _in_line(client: Client, node: str, pool: str) -> str:
    """Read as `remedy status --blocking --pool` reads it: one answer of the pool's budget, so
    the place and the holders are of the same moment."""
    read = await pools_blocking(client, "", pool)
    return place_in_line(read.pools[0], node) if read.pools else ""


def timeline(ladder: NodeLadder) -> list[str]:
    lines = [
        f"{ladder.node}: {ladder.status}"
        + (f" — runbook {ladder.runbook}" if ladder.runbook else "")
        + (f", trigger {ladder.trigger}" if ladder.trigger else "")
        + (f", reported by {ladder.sent_by}" if ladder.sent_by else "")
        + _when(ladder)
    ]
    if ladder.in_line:
        lines.append(f"    {ladder.in_line}")
    approvals = sorted(ladder.approvals, key=lambda a: a.at)
    escalations = sorted(ladder.escalations, key=lambda e: e.at)
    for a in ladder.attempts:
        while approvals and approvals[0].at <= a.started_at:  # in time, attempts as recorded
            lines.append(_approval(approvals.pop(0), ladder.escalations))
        while escalations and escalations[0].at <= a.started_at:
            lines.append(_escalation(escalations.pop(0), ladder.escalations))
        # people count rungs from 1, on through a change of runbooks (remedy.core.numbering)
        rung = f"{rung_label(a.rung, ladder.escalations, a.epoch):>3}"
        took = format_duration(a.finished_at - a.started_at)
        lines.append(
            f"{rung} {a.started_at:%H:%M:%S} {a.action.value:<10} {a.result.value:<18} "
            f"{took:>6}  {a.detail}"
        )
    lines += [_approval(a, ladder.escalations) for a in approvals]
    lines += [_escalation(e, ladder.escalations) for e in escalations]
    if ladder.now is not None:
        lines.append(_under_way(ladder.now, ladder.read_at))
    lines += [f"  > waiting: {w.describe()}" for w in ladder.waiting]
    lines += [f"  x {r.at:%H:%M:%S} {_refused(r.verb)} refused: {r.why}" for r in ladder.refused]
    if ladder.refusals > len(ladder.refused):
        lines.append(f"  x {ladder.refusals} messages refused in all (the latest shown)")
    if ladder.detail:
        lines.append(f"    {ladder.detail}")
    # Details and refusals quote what nodes said: nothing in them may reorder a line.
    return [visible(line) for line in lines]


def _under_way(now: UnderWay, read_at: datetime | None) -> str:
    """The rung under way as a row of its own: since when its phase holds, for how long."""
    since = f"{now.since:%H:%M:%S}" if now.since else " " * 8
    took = format_duration(max(read_at - now.since, ZERO)) if read_at and now.since else ""
    return f"{now.number:>3} {since} {now.action:<10} {now.phase:<18} {took:>6}  {now.how}".rstrip()


def _refused(verb: str) -> str:
    """A decision refused as a signal is said so; the door's refusals name their message."""
    return f"{verb} signal" if verb in {v.value for v in Verb} else verb


def _escalation(e: Escalation, every: list[Escalation]) -> str:
    first = first_number(every, every.index(e) + 1) if e in every else 0
    return f"  ^ {e.at:%H:%M:%S} {e.describe(first)}"


def _approval(a: Approval, escalations: list[Escalation]) -> str:
    note = f": {a.note}" if a.note else ""
    number = rung_number(a.rung, escalations, a.epoch)
    return f"{number:>3} {a.at:%H:%M:%S} approved by {a.who}{note}"


def _when(ladder: NodeLadder) -> str:
    """Since when the phase holds, and an approval's deadline: absolute, and relative to the
    read."""
    said = ""
    if ladder.since is not None:
        said += f"; since {at(ladder.since)}" + _ago(ladder.since, ladder.read_at)
    if ladder.deadline is not None:
        said += f"; approval times out at {at(ladder.deadline)}"
        if ladder.read_at is not None:
            said += f" (in {format_duration(max(ladder.deadline - ladder.read_at, ZERO))})"
    return said


def _ago(when: datetime, now: datetime | None) -> str:
    return f" ({format_duration(max(now - when, ZERO))} ago)" if now is not None else ""
