"""A grant names the run whose request it answers; a ladder takes only its own.

Grants are signals to the holder's workflow id, and a node's ladders share one: a grant the
budget decided for an earlier run could reach the next (a node's next ladder, a run started
after a terminate), which took it as its own lease without asking. And one whose request won
before the request's record did (a ladder's first workflow task ran its local activities, its
lease request among them, then timed out: seen in 10 of 500 ladders of a 1,000-node burst,
2026-12-03) was held and never given back: the budget counted it until its sweep found the
holder closed."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.activities import RELEASE_LEASE, REQUEST_LEASE
from contract.messages import LEASE_GRANTED, LEASE_RELEASE, LEASE_REQUEST
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.core.models import Scope
from remedy.disruption.budget import (
    BudgetPolicy,
    BudgetState,
    LeaseGrant,
    LeaseRelease,
    LeaseRequest,
)
from remedy.ladder.remediation import Outcome, Phase, RemediationState
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import local_activities, report, state_of, wait_for_phase
from tests.test_budget_burst import idle_ladders
from tests.test_disruption_budget import budget_state, tolerating
from tests.test_job_watch import eventually
from tests.test_lease_answered import FREE
from workers.controller import controller_worker


async def _ladder_granted(
    env: WorkflowEnvironment, prefix: str, run: str | None
) -> tuple[RemediationState, list[str], Outcome]:
    """A ladder sent a grant while it waits out its tolerance window, before it asks: for
    its own run (``None``) or the run given."""
    fleet: SimFleet = own_fleet(prefix, 1)
    (node,) = sorted(fleet.nodes)
    async with running_workers(env.client, fleet, policy=FREE) as queues:
        ladder = await report(env.client, queues, fleet.inject(node, "ecc_dbe"), tolerating())
        await wait_for_phase(env, ladder, Phase.TOLERATING)
        run = run or (await ladder.describe()).run_id
        await LEASE_GRANTED.send(ladder, LeaseGrant(pool=queues.pool, scope=Scope.NODE, run=run))
        result = await ladder.result()
        state = await state_of(ladder)
        calls = await local_activities(env.client, ladder.id)
    return state, calls, result.outcome


async def test_a_grant_for_this_run_before_its_request_is_held_and_given_back(
    time_env: WorkflowEnvironment,
) -> None:
    state, calls, outcome = await _ladder_granted(time_env, "granted-first", None)
    assert outcome is Outcome.RECOVERED
    # Held from the grant, and given back: nothing asked again, the release sent.
    assert state.lease_granted_at is not None and state.lease_requested_at is not None
    assert state.lease_released_at is not None
    assert REQUEST_LEASE.name not in calls and calls[-1] == RELEASE_LEASE.name, calls


async def test_an_earlier_runs_grant_is_not_taken(time_env: WorkflowEnvironment) -> None:
    state, calls, outcome = await _ladder_granted(time_env, "stale-grant", "an-earlier-run")
    assert outcome is Outcome.RECOVERED
    # It asked for its own lease (granted for its run), and gave that back.
    assert calls.count(REQUEST_LEASE.name) == 1 and calls[-1] == RELEASE_LEASE.name, calls
    assert state.lease_asked_in and state.lease_asked_in != "an-earlier-run"
    assert state.lease_granted_at is not None and state.lease_released_at is not None


async def _ask(client: Client, queues: Queues, holder: str, node: str, run: str) -> None:
    req = LeaseRequest(
        holder=holder,
        node=node,
        pool=queues.pool,
        task_queue=queues.controller,
        pool_size=2,
        policy=BudgetPolicy(max_disruption="1", storm_share=1.0),
        run=run,
    )
    await client.start_workflow(
        DISRUPTION_BUDGET_WORKFLOW,
        BudgetState(pool=queues.pool, policy=req.policy),
        id=budget_workflow_id(queues.pool),
        task_queue=queues.controller,
        **LEASE_REQUEST.start_with(req),
    )


async def test_the_grant_names_the_run_that_asked_last(time_env: WorkflowEnvironment) -> None:
    """Two holders, a cap of one: the second waits, asks again from a new run, and is granted
    when the first gives its lease back. The grant names the new run, not the first."""
    client = time_env.client
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    queues = Queues(controller=f"test-{uuid.uuid4()}", agents="", pool=pool)
    first, second = await idle_ladders(client, pool, 2)
    await _ask(client, queues, first, f"{pool}-n00", "first-run")
    with ThreadPoolExecutor(max_workers=4) as executor:
        cluster = SimFleet(nodes=1, pool=pool).cluster
        async with controller_worker(client, cluster, executor, queues.controller):

            async def holding(holder: str) -> BudgetState | None:
                state = await budget_state(client, pool)
                return state if [h.holder for h in state.holders] == [holder] else None

            await eventually(lambda: holding(first))
            await _ask(client, queues, second, f"{pool}-n01", "second-run-a")
            await _ask(client, queues, second, f"{pool}-n01", "second-run-b")

            async def asked_again() -> BudgetState | None:
                state = await budget_state(client, pool)
                runs = [w.run for w in state.waiting]
                return state if runs == ["second-run-b"] else None

            await eventually(asked_again)
            budget = client.get_workflow_handle(budget_workflow_id(pool))
            await LEASE_RELEASE.send(budget, LeaseRelease(holder=first))
            await eventually(lambda: holding(second))

            async def grants() -> list[LeaseGrant] | None:
                told = [
                    LeaseGrant.model_validate_json(
                        e.workflow_execution_signaled_event_attributes.input.payloads[0].data
                    )
                    async for e in client.get_workflow_handle(second).fetch_history_events()
                    if e.workflow_execution_signaled_event_attributes.signal_name
                    == LEASE_GRANTED.name
                ]
                return told or None

            told = await eventually(grants)
    assert [g.run for g in told] == ["second-run-b"]
