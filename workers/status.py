"""`remedy status`: the fleet at a glance, from the latest fleet scan's summary and each
pool's disruption budget (leases, waiters, storm breaker), both read from Temporal."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from remedy.budget import BudgetState
from remedy.fleet import FleetSummary, NodeStatus, PoolSummary
from remedy.names import FLEET_SCAN_SCHEDULE, budget_workflow_id
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan


class NoScanYet(Exception):
    pass


class PoolStatus(BaseModel):
    summary: PoolSummary
    budget: BudgetState | None = None  # None: no disruptive work asked for yet

    @property
    def tripped(self) -> bool:
        return self.budget is not None and self.budget.tripped


class FleetStatus(BaseModel):
    scanned_at: datetime
    pools: list[PoolStatus]

    @property
    def breaker_tripped(self) -> bool:
        return any(p.tripped for p in self.pools)


async def fleet_status(client: Client, schedule_id: str = FLEET_SCAN_SCHEDULE) -> FleetStatus:
    summary = await latest_scan(client, schedule_id)
    pools = [PoolStatus(summary=pool, budget=await _budget(client, pool.pool))
             for pool in summary.pools]
    return FleetStatus(scanned_at=summary.at, pools=pools)


async def latest_scan(client: Client, schedule_id: str) -> FleetSummary:
    """The newest completed scan the schedule started (a running one is skipped)."""
    try:
        description = await client.get_schedule_handle(schedule_id).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            raise NoScanYet(f"no fleet-scan schedule {schedule_id!r}: is the controller "
                            "running?") from None
        raise
    for action in reversed(description.info.recent_actions):
        started = action.action
        if not isinstance(started, ScheduleActionExecutionStartWorkflow):
            continue
        handle = client.get_workflow_handle_for(FleetScan.run, started.workflow_id,
                                                run_id=started.first_execution_run_id)
        if (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED:
            return await handle.result()
    raise NoScanYet(f"schedule {schedule_id!r} has not completed a fleet scan yet")


async def _budget(client: Client, pool: str) -> BudgetState | None:
    handle = client.get_workflow_handle_for(DisruptionBudget.run, budget_workflow_id(pool))
    try:
        return await handle.query(DisruptionBudget.state)
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise


COLUMNS = [NodeStatus.HEALTHY, NodeStatus.IN_REMEDIATION, NodeStatus.NEEDS_HUMAN,
           NodeStatus.CORDONED, NodeStatus.ADMITTING, NodeStatus.REJECTED, NodeStatus.UNHEALTHY,
           NodeStatus.UNMANAGED]


def render(status: FleetStatus) -> list[str]:
    """Plain text that reads in a terminal and in a pager; one row per pool, then alerts."""
    names = ["pool", "nodes", *(c.value.replace("_", " ") for c in COLUMNS), "leases",
             "waiting", "breaker"]
    rows = [names]
    for pool in status.pools:
        budget = pool.budget
        leases = f"{len(budget.holders)}/{budget.allowed}" if budget else "-"
        rows.append([pool.summary.pool, str(pool.summary.nodes),
                     *(str(pool.summary.count(c)) for c in COLUMNS), leases,
                     str(len(budget.waiting)) if budget else "-",
                     "TRIPPED" if pool.tripped else "ok"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(names))]
    lines = [f"fleet scanned at {status.scanned_at:%Y-%m-%d %H:%M:%S} UTC", ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    for pool in status.pools:
        if pool.tripped and pool.budget:
            lines += ["", f"ALERT pool {pool.summary.pool}: {pool.budget.breaker_note}",
                      f"      resume with: remedy resume-pool {pool.summary.pool}"]
    return lines
