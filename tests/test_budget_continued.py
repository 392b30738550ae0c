"""A DisruptionBudget that continued as new still says who blocks whom on its page: the new
run's current details name the holder, what frees it, and the waiter in line (the dev server
suggests continue-as-new at 40 events). And it keeps its place ahead of the ladders' backlog:
both of the budget's runs carry the urgent priority, and a ladder's lease request, a local
activity of its workflow task, waits in no queue at all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from contract.activities import CORDON, REQUEST_LEASE
from contract.defs import URGENT
from contract.messages import NODE_UNHEALTHY
from contract.names import budget_workflow_id, remediation_workflow_id
from remedy.disruption.budget import BudgetPolicy, UnhealthyReport
from tests.conftest import SUGGEST_CONTINUE_AS_NEW_AT, own_fleet, running_workers
from tests.test_job_watch import eventually
from tests.test_pool_held_by_people import details, held_and_waiting, replace_after_approval

POLICY = BudgetPolicy(max_disruption="1", storm_share=1.0)


async def test_the_budget_names_its_holders_and_waiters_after_it_continued_as_new(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("budget-can", 3)
    first, second, _ = sorted(fleet.nodes)
    runbook = replace_after_approval()
    async with running_workers(client, fleet, policy=POLICY) as queues:
        pool = queues.pool
        step = timedelta(seconds=0.2)  # the dev server's clock is real
        await held_and_waiting(dev_env, queues, fleet, runbook, step=step)
        budget = client.get_workflow_handle(budget_workflow_id(pool))
        first_run = (await budget.describe()).run_id

        async def continued() -> str | None:
            """Another report of the same node (the breaker counts it once): events, until
            the server suggests continue-as-new; then quiet (the budget continues as new in a
            moment with no message, workflows/budget_renewal.py); the new run's id once it
            began."""
            described = await budget.describe()
            if described.run_id != first_run:
                return described.run_id
            info = described.raw_description.workflow_execution_info
            if info.history_length > SUGGEST_CONTINUE_AS_NEW_AT:
                return None
            again = UnhealthyReport(
                node=first,
                pool=pool,
                task_queue=queues.controller,
                at=datetime.now(UTC),
                pool_size=3,
                policy=POLICY,
            )
            await NODE_UNHEALTHY.send(budget, again)
            return None

        second_run = await eventually(continued, within_s=60)
        said = await eventually(lambda: details(client, budget.id), within_s=30)
        first_keys = await priorities(client, budget.id, first_run)
        second_keys = await priorities(client, budget.id, second_run)
        ladder_keys = await priorities(client, remediation_workflow_id(first), every_run=True)
    # The first line stands in for the summary, which continue-as-new cannot carry (the SDK
    # has no way to pass it on): the page says the pool and its shares all the same.
    assert said.startswith(f"**pool {pool}**: 1/1 leases, 1 waiting"), said
    assert f"`{first}` holds a lease since " in said
    assert "waits for approval for replace" in said and f"`remedy approve {first}`" in said
    assert f"- 1. `{second}`" in said
    assert "Breaker: ok" in said
    urgent = URGENT.priority_key
    # Both runs of the budget (continue-as-new keeps it), and each hop of a lease.
    assert first_keys["started"] == second_keys["started"] == {urgent}, (first_keys, second_keys)
    # What the budget scheduled inherits its priority (0), or says urgent itself.
    assert set().union(*(v for k, v in first_keys.items() if k != "started")) <= {0, urgent}
    # The ladder's own work keeps its own place; its first cordon and its lease request are
    # local activities: no task at all.
    assert CORDON.name not in ladder_keys and REQUEST_LEASE.name not in ladder_keys, ladder_keys
    assert set().union(*ladder_keys.values()) == {0}, ladder_keys


async def priorities(
    client: Client, workflow_id: str, run_id: str | None = None, every_run: bool = False
) -> dict[str, set[int]]:
    """The priority keys a run's history gave its start ("started") and each activity type
    it scheduled (0: none of its own, the workflow's). ``every_run``: also the runs it
    continued from, followed back through the histories (not visibility, which may lag)."""
    keys: dict[str, set[int]] = {}
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        run_id = None
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                started = event.workflow_execution_started_event_attributes
                keys.setdefault("started", set()).add(started.priority.priority_key)
                run_id = started.continued_execution_run_id or None
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled = event.activity_task_scheduled_event_attributes
                name, key = scheduled.activity_type.name, scheduled.priority.priority_key
                keys.setdefault(name, set()).add(key)
        if not (every_run and run_id):
            return keys
