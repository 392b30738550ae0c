"""What an experiment did, from the fleet file and from Temporal's visibility: ladders run,
doubled effects, lost and stuck ladders, orphaned cordons, and the peak of nodes holding a
disruption lease at once (from each ladder's own state) against the cap."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError

from adapters.sim.cluster import REMEDY_CORDON
from chaos.stage import Stage
from contract.messages import LEASE_RELEASE, REMEDIATION_STATE
from contract.names import NODE_REMEDIATION_WORKFLOW, remediation_workflow_id
from contract.search_attributes import OUTCOME, PHASE, PHASE_SINCE, RUNG
from remedy.ladder.remediation import Outcome, RemediationResult, RemediationState

LEFT_TO_A_PERSON = {Outcome.NEEDS_HUMAN.value, Outcome.ABORTED.value}
LOST = {
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
}
QUERY_TRIES = 5


@dataclass
class Row:
    key: str
    title: str
    faults: int  # injected (each reported)
    ladders: int
    doubled: list[tuple[str, str, str]]
    lost: list[str]  # workflow id/run id
    stuck: list[str]
    orphaned: list[str]  # nodes
    stale: list[str]  # ladders started by a report an earlier ladder had handled
    peak: int
    cap: int
    outcomes: Counter[str] = field(default_factory=Counter)
    # What the experiment did: kills, outages, knobs that fired (chaos.knobs.Tally's names).
    events: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    # Where each stuck ladder stood (its phase, rung, since when): what a failure says first.
    stuck_at: list[str] = field(default_factory=list)

    @property
    def extra_ladders(self) -> int:
        """Ladders no injected fault accounts for (started by a stale report)."""
        return max(0, self.ladders - self.faults)


async def ladders(client: Client, prefix: str) -> list[WorkflowExecution]:
    """Every run of the experiment's ladders (continued-as-new runs left out: a chain is one
    ladder)."""
    found = []
    query = f"WorkflowType = '{NODE_REMEDIATION_WORKFLOW}'"
    async for w in client.list_workflows(query):
        if w.id.startswith(prefix) and w.status is not WorkflowExecutionStatus.CONTINUED_AS_NEW:
            found.append(w)
    return found


def stood(run: WorkflowExecution) -> str:
    """A running ladder's phase, rung and since when, from its search attributes."""
    found = run.typed_search_attributes
    since = found.get(PHASE_SINCE)
    return (
        f"{run.id}: {found.get(PHASE) or '?'} at rung {found.get(RUNG) or '-'}"
        f" since {since:%H:%M:%S} ({(datetime.now(UTC) - since).total_seconds():.0f} s before)"
        if since
        else f"{run.id}: {found.get(PHASE) or '?'}"
    )


async def measure(st: Stage, title: str, faults: int) -> Row:
    runs = await ladders(st.client, st.ladder_prefix)
    fleet = st.store.read().fleet
    row = Row(
        key=st.key,
        title=title,
        faults=faults,
        ladders=len(runs),
        doubled=fleet.doubled(),
        lost=[f"{w.id}/{w.run_id} {w.status.name}" for w in runs if w.status in LOST],
        stuck=[f"{w.id}/{w.run_id}" for w in runs if w.status is WorkflowExecutionStatus.RUNNING],
        stuck_at=[stood(w) for w in runs if w.status is WorkflowExecutionStatus.RUNNING],
        orphaned=[],
        stale=await _stale(st.client, runs),
        peak=await _peak(st.client, runs),
        cap=st.cap,
    )
    for w in runs:
        outcome = w.typed_search_attributes.get(OUTCOME)
        row.outcomes[outcome or (w.status.name.lower() if w.status else "unknown")] += 1
    for node in fleet.nodes.values():
        if REMEDY_CORDON in node.annotations and not await _owned(st.client, node.name):
            row.orphaned.append(node.name)
    return row


async def _stale(client: Client, runs: list[WorkflowExecution]) -> list[str]:
    """Ladders that handled nothing an earlier ladder of their node had not handled already:
    started by a stale report (each says how long after its node's previous ladder closed)."""
    found = []
    by_node: dict[str, list[WorkflowExecution]] = {}
    for w in sorted(runs, key=lambda w: w.start_time):
        by_node.setdefault(w.id, []).append(w)
    for ladders_of_node in by_node.values():
        handled: set[str] = set()
        previous: WorkflowExecution | None = None
        for w in ladders_of_node:
            if w.status is WorkflowExecutionStatus.COMPLETED:
                handle = client.get_workflow_handle(
                    w.id, run_id=w.run_id, result_type=RemediationResult
                )
                result: RemediationResult = await handle.result()
                mine = set(result.handled)
                if previous is not None and mine and mine <= handled:
                    after = (w.start_time - (previous.close_time or w.start_time)).total_seconds()
                    found.append(
                        f"{w.id}/{w.run_id} ({', '.join(_actions(result))}) started {after:.2f} s "
                        f"after {previous.run_id} closed"
                    )
                handled |= mine
            previous = w
    return found


def _actions(result: RemediationResult) -> list[str]:
    return [a.action.value for a in result.attempts]


async def _owned(client: Client, node: str) -> bool:
    """remedy's cordon on the node is owned: a ladder runs, or the last one left it to a
    person."""
    try:
        desc = await client.get_workflow_handle(remediation_workflow_id(node)).describe()
    except RPCError:
        return False
    if desc.status is WorkflowExecutionStatus.RUNNING:
        return True
    outcome = desc.typed_search_attributes.get(OUTCOME)
    return desc.status is WorkflowExecutionStatus.COMPLETED and outcome in LEFT_TO_A_PERSON


async def _peak(client: Client, runs: list[WorkflowExecution]) -> int:
    """The most ladders holding a lease at once. A lease begins at the ladder's
    ``lease_granted_at`` (its state) and ends when the ladder let go of it: when it sent the
    release (the signal's initiation in its history). Its ``lease_released_at`` is stamped a
    workflow task later, after the signal was delivered; a controller killed in between
    delays that task by the workflow task timeout while the budget has already given the
    lease to another node, and would count an overlap that never was."""
    now = datetime.now(UTC)
    leases = []
    for w in runs:
        handle = client.get_workflow_handle(w.id, run_id=w.run_id)
        state = await _state(handle)
        if state.lease_granted_at is not None:
            let_go = await _release_sent(handle)
            end = let_go or state.lease_released_at or w.close_time or now
            leases.append((state.lease_granted_at, end))
    return peak_concurrency(leases)


async def _state(handle: WorkflowHandle[Any, Any]) -> RemediationState:
    for _ in range(QUERY_TRIES - 1):
        try:
            return await REMEDIATION_STATE.ask(handle)
        except RPCError:
            await asyncio.sleep(1.0)
    return await REMEDIATION_STATE.ask(handle)


async def _release_sent(handle: WorkflowHandle[Any, Any]) -> datetime | None:
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
            sent = event.signal_external_workflow_execution_initiated_event_attributes
            if sent.signal_name == LEASE_RELEASE.name:
                return event.event_time.ToDatetime(UTC)
    return None


def peak_concurrency(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals (lease granted → released) that overlap at any moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak
