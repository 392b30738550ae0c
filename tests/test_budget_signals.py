"""The activity that delivers a budget's grants and leave to cordon (activities/budget_signals.py)
against the time-skipping server's real workflows: what a retry resumes, what it reports gone."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.budget_signals import BudgetSignalActivities
from contract.messages import CORDON_LEAVE, LEASE_GRANTED
from remedy.disruption.budget import LeaseGrant
from remedy.disruption.budget_signals import BudgetSignals, GrantTo
from tests.test_budget_burst import idle_ladders


async def _signals(client: Client, workflow_id: str) -> list[str]:
    return [
        e.workflow_execution_signaled_event_attributes.signal_name
        async for e in client.get_workflow_handle(workflow_id).fetch_history_events()
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]


async def test_a_retry_resumes_after_its_last_heartbeat_and_reports_who_is_gone(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    done, todo, asked = await idle_ladders(client, pool, 3)
    never_ran = f"burst/{uuid.uuid4()}"
    grant = LeaseGrant(pool=pool)
    out = BudgetSignals(
        pool=pool,
        grants=[GrantTo(holder=h, grant=grant) for h in (done, todo, never_ran)],
        leave=[asked],
    )
    env = ActivityEnvironment()
    # The attempt before sent the first signal, said so, and died.
    env.info = dataclasses.replace(env.info, heartbeat_details=[1, []], attempt=2)
    beats: list[tuple[Any, ...]] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    result = await env.run(BudgetSignalActivities(client).deliver_budget_signals, out)

    assert result.gone == [never_ran]  # its lease goes back to the pool
    assert await _signals(client, done) == []  # not sent again
    assert await _signals(client, todo) == [LEASE_GRANTED.name]
    assert await _signals(client, asked) == [CORDON_LEAVE.name]
    assert beats[-1] == (4, [never_ran])  # what a further retry would resume from
