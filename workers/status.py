"""`remedy status`: the fleet at a glance, from the latest fleet scan's summary and each
pool's disruption budget (leases, waiters, storm breaker) and the cluster's breaker, all read
from Temporal (status_table.py lays them out)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleDescription,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from contract import search_attributes
from contract.messages import BUDGET_STATE
from contract.names import (
    FLEET_SCAN_SCHEDULE,
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
    budget_workflow_id,
    remediation_workflow_id,
)
from remedy.disruption import held_by_people as people
from remedy.disruption.budget import CLUSTER_POOL, BudgetState
from remedy.disruption.quarantine import SilenceStorm
from remedy.ladder.remediation import Phase
from remedy.scan.admission import AdmissionPhase
from remedy.scan.fleet import STARTING, FleetSummary, NodeStatus, PoolSummary
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan


class NoScanYet(Exception):
    pass


class PoolStatus(BaseModel):
    summary: PoolSummary
    budget: BudgetState | None = None  # None: no disruptive work asked for yet
    # The shares only a person can free, with the commands that free each (for --json).
    held_by_people: list[people.PersonHold] = []
    seized: bool = False  # every share held by people, ladders waiting behind them

    @property
    def tripped(self) -> bool:
        return self.budget is not None and self.budget.tripped


class NodeRow(BaseModel):
    """One node someone may need to look at: in remediation, being admitted, or left for a
    human by a finished ladder."""

    node: str
    pool: str
    state: str  # the ladder's phase, "admission: <phase>", or the scan's status
    fault: str = ""
    runbook: str = ""
    rung: str = ""
    since: datetime | None = None
    awaiting_approval: bool = False
    workflow_id: str = ""


class FleetStatus(BaseModel):
    at: datetime | None = None  # when it was read (how long people have held a pool)
    scanned_at: datetime | None = None  # None: no fleet scan yet (pool counts unknown)
    pools: list[PoolStatus] = []
    nodes: list[NodeRow] = []
    job_watch_error: str = ""  # the latest scan could not hand job failures to their guards
    cluster: BudgetState | None = None  # the cluster-wide breaker (None: never asked)
    silence: SilenceStorm | None = None  # the latest scan saw many agents silent at once

    @property
    def breaker_tripped(self) -> bool:
        """A pool's breaker, the cluster's, or a silence storm: remedy holds back."""
        cluster = self.cluster is not None and self.cluster.tripped
        return any(p.tripped for p in self.pools) or cluster or self.silence is not None


# Every state a node's row can show: a ladder's phase, an admission's, or what the scan says of
# a node no workflow owns. ``--state`` keeps the rows whose state contains the word it is given.
NODE_STATES = (
    *(p.value for p in Phase),
    STARTING,
    *(f"admission: {p.value}" for p in AdmissionPhase),
    *(s.value for s in NodeStatus),
)


def why_not_state(word: str) -> str:
    """Why ``--state WORD`` could never keep a row (empty: it could). ``waiting`` is fine (it
    is part of waiting_for_finding); ``bogus`` is not, and the answer lists the states."""
    if any(_says(state, word) for state in NODE_STATES):
        return ""
    return f"--state {word!r} matches no node state; use one of: " + ", ".join(NODE_STATES)


def _says(state: str, word: str) -> bool:
    """The state contains the word, as stored (needs_human) or as the table shows it."""
    return word in state or word in state.replace("_", " ")


class NodeFilter(BaseModel):
    pool: str | None = None
    state: str | None = None  # a word the row's state contains
    awaiting_approval: bool = False

    def keeps(self, row: NodeRow) -> bool:
        return (
            (self.pool is None or row.pool == self.pool)
            and (self.state is None or _says(row.state, self.state))
            and (not self.awaiting_approval or row.awaiting_approval)
        )


async def fleet_status(
    client: Client, schedule_id: str = FLEET_SCAN_SCHEDULE, only: NodeFilter | None = None
) -> FleetStatus:
    """Pools from the latest scan (if any) and the nodes that need looking at. Raises NoScanYet
    only when there is neither a scan nor a node to show."""
    only = only or NodeFilter()
    summary: FleetSummary | None = None
    try:
        summary = await latest_scan(client, schedule_id)
    except NoScanYet as no_scan:
        missing = no_scan
    rows = await open_work_rows(client)
    if summary is not None:
        rows += await _attention_rows(client, summary, {r.node for r in rows})
    rows = sorted((r for r in rows if only.keeps(r)), key=lambda r: (r.pool, r.node))
    if summary is None and not rows:
        raise missing
    pools = [
        _pool(pool, await read_budget(client, pool.pool))
        for pool in (summary.pools if summary else [])
        if only.pool is None or pool.pool == only.pool
    ]
    return FleetStatus(
        at=datetime.now(UTC),
        scanned_at=summary.at if summary else None,
        pools=pools,
        nodes=rows,
        job_watch_error=summary.job_watch_error if summary else "",
        cluster=await read_budget(client, CLUSTER_POOL),
        silence=summary.silence if summary else None,
    )


def _pool(summary: PoolSummary, budget: BudgetState | None) -> PoolStatus:
    if budget is None:
        return PoolStatus(summary=summary)
    return PoolStatus(
        summary=summary,
        budget=budget,
        held_by_people=people.held_by_people(budget),
        seized=people.seized(budget),
    )


OPEN_WORK = (
    f"WorkflowType IN ('{NODE_REMEDIATION_WORKFLOW}', '{NODE_ADMISSION_WORKFLOW}') "
    "AND ExecutionStatus = 'Running'"
)


async def open_work_rows(client: Client) -> list[NodeRow]:
    """Running remediations and admissions, from visibility (their search attributes): one
    list call, no query per workflow."""
    return [_row(w) async for w in client.list_workflows(OPEN_WORK)]


async def _attention_rows(client: Client, summary: FleetSummary, seen: set[str]) -> list[NodeRow]:
    """Nodes the scan says need someone and no workflow owns: what their last ladder said. A
    node an abort held for a person is one of them, its state ``held_for_person``."""
    rows = []
    for pool in summary.pools:
        held = dict.fromkeys(pool.held, Phase.HELD_FOR_PERSON)
        for node, status in {**pool.attention, **held}.items():
            if node in seen:
                continue
            last = [
                _row(w)
                async for w in client.list_workflows(
                    f"WorkflowId = '{remediation_workflow_id(node)}'", limit=1
                )
            ]
            row = last[0] if last else NodeRow(node=node, pool=pool.pool, state="")
            rows.append(
                row.model_copy(
                    update={"state": status.value, "pool": pool.pool, "awaiting_approval": False}
                )
            )
    return rows


def _row(w: WorkflowExecution) -> NodeRow:
    attrs = w.typed_search_attributes
    phase = attrs.get(search_attributes.PHASE) or ""
    admission = w.workflow_type == NODE_ADMISSION_WORKFLOW
    node = attrs.get(search_attributes.NODE) or w.id.split("/", 1)[-1]
    return NodeRow(
        node=node,
        pool=attrs.get(search_attributes.POOL) or "",
        state=f"admission: {phase}" if admission else phase or STARTING,
        fault=attrs.get(search_attributes.FAULT) or "",
        runbook=attrs.get(search_attributes.RUNBOOK) or "",
        rung=attrs.get(search_attributes.RUNG) or "",
        since=attrs.get(search_attributes.PHASE_SINCE) or w.start_time,
        awaiting_approval=not admission and phase == Phase.AWAITING_APPROVAL.value,
        workflow_id=w.id,
    )


async def latest_scan(client: Client, schedule_id: str) -> FleetSummary:
    """The newest completed scan the schedule started (a running one is skipped)."""
    try:
        description = await client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            raise NoScanYet(
                f"no fleet-scan schedule {schedule_id!r}: is the controller running?"
            ) from None
        raise
    for handle in scans_started(client, description):
        if (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED:
            return await handle.result()
    raise NoScanYet(f"schedule {schedule_id!r} has not completed a fleet scan yet")


def scans_started(
    client: Client, description: ScheduleDescription
) -> list[WorkflowHandle[FleetScan, FleetSummary]]:
    """The scans the schedule started (the last few it remembers), newest first."""
    return [
        client.get_workflow_handle_for(
            FleetScan.run, started.workflow_id, run_id=started.first_execution_run_id
        )
        for action in reversed(description.info.recent_actions)
        if isinstance(started := action.action, ScheduleActionExecutionStartWorkflow)
    ]


async def read_budget(client: Client, pool: str) -> BudgetState | None:
    handle = client.get_workflow_handle_for(DisruptionBudget.run, budget_workflow_id(pool))
    try:
        return await BUDGET_STATE.ask(handle)
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise
