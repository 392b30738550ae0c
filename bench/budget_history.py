"""What the budget bench reads back from the server once a run is over: the budget's history
(its events, when each grant was sent and delivered), when each ladder's history got its grant,
and, during the burst, when every ladder of the pool waits."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowHandle

from contract.activities import DELIVER_BUDGET_SIGNALS
from contract.messages import LEASE_GRANTED
from contract.names import budget_workflow_id
from remedy.disruption.budget import BudgetState
from remedy.disruption.budget_signals import BudgetSignals
from workflows.disruption_budget import DisruptionBudget


async def history_of(
    client: Client, workflow_id: str
) -> tuple[Counter[str], list[datetime], dict[int, datetime]]:
    """Events by type over every run of ``workflow_id`` (continue-as-new included), when each
    of its grants was delivered (the delivery activity's completion, once per grant in it; a
    signal's own event in a run from before), and when each was sent (by the event id of the
    workflow task that sent it)."""
    counts: Counter[str] = Counter()
    delivered, sent = [], {}
    async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
        grants: dict[int, int] = {}  # delivery activity's scheduled event id → its grants
        for e in history.events:
            at = e.event_time.ToDatetime(tzinfo=UTC)
            counts[EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")] += 1
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:  # and why, beside it
                cause = e.workflow_task_failed_event_attributes.cause
                counts[f"WORKFLOW_TASK_FAILED {WorkflowTaskFailedCause.Name(cause)}"] += 1
            scheduled = e.activity_task_scheduled_event_attributes
            if (
                e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and scheduled.activity_type.name == DELIVER_BUDGET_SIGNALS.name
            ):
                out = BudgetSignals.model_validate_json(scheduled.input.payloads[0].data)
                grants[e.event_id] = len(out.grants)
                sent[scheduled.workflow_task_completed_event_id] = at
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = e.activity_task_completed_event_attributes.scheduled_event_id
                delivered += [at] * grants.get(done, 0)
            if e.event_type == EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED:
                delivered.append(at)
            if e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
                task = e.signal_external_workflow_execution_initiated_event_attributes
                sent[task.workflow_task_completed_event_id] = at
    return counts, delivered, sent


async def received_at(client: Client, handle: WorkflowHandle[Any, Any]) -> datetime | None:
    """When the ladder's history got its lease grant (the signal's event), if it did."""
    async for e in client.get_workflow_handle(handle.id).fetch_history_events():
        attributes = e.workflow_execution_signaled_event_attributes
        if (
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and attributes.signal_name == LEASE_GRANTED.name
        ):
            return e.event_time.ToDatetime(tzinfo=UTC)
    return None


async def all_waiting(client: Client, pool: str, nodes: int) -> None:
    """Until every ladder of the pool waits for a lease (the budget's own record)."""
    budget = client.get_workflow_handle_for(DisruptionBudget.run, budget_workflow_id(pool))
    while True:
        try:
            state: BudgetState = await budget.query(DisruptionBudget.state)
            if len(state.waiting) >= nodes:
                return
        except Exception:  # noqa: BLE001 - not started yet
            pass
        await asyncio.sleep(1)
