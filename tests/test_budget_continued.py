"""A DisruptionBudget that continued as new still says who blocks whom on its page: the new
run's current details name the holder, what frees it, and the waiter in line (the dev server
suggests continue-as-new at 40 events)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from contract.messages import NODE_UNHEALTHY
from contract.names import budget_workflow_id
from remedy.budget import BudgetPolicy, UnhealthyReport
from tests.conftest import own_fleet, running_workers
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
            the server suggests continue-as-new; the new run's id once it began."""
            run = (await budget.describe()).run_id
            if run != first_run:
                return run
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

        await eventually(continued, within_s=60)
        said = await eventually(lambda: details(client, budget.id), within_s=30)
    # The first line stands in for the summary, which continue-as-new cannot carry (the SDK
    # has no way to pass it on): the page says the pool and its shares all the same.
    assert said.startswith(f"**pool {pool}**: 1/1 leases, 1 waiting"), said
    assert f"`{first}` holds a lease since " in said
    assert "waits for approval for replace" in said and f"`remedy approve {first}`" in said
    assert f"- 1. `{second}`" in said
    assert "Breaker: ok" in said
