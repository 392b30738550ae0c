"""A lease the pool's budget can grant at once is the answer to the ladder's request (an update
of the budget): no grant signal, no workflow task of the ladder's for it, no re-ask timer. One
it cannot grant yet comes by signal, as before, and so does every request an update cannot
carry (no budget running yet, the server's cap on updates in flight, a continue-as-new). On the
dev server, whose clock is real: the time-skipping one writes an update's acceptance where a
replay does not find it, and its requests go by signal (checked here too)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from activities.budget import BudgetActivities
from contract.messages import APPROVE, ASK_LEASE, LEASE_GRANTED
from contract.names import budget_workflow_id
from remedy.core.models import Action, Finding, Severity
from remedy.disruption.budget import BudgetPolicy, LeaseWanted
from remedy.ladder.remediation import Outcome, Phase, RemediationState
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import ApproveRequest
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import report, state_of, wait_for_phase
from tests.test_budget_renewal import runs_of
from tests.test_disruption_budget import budget_state
from tests.test_job_watch import eventually
from tests.test_pool_held_by_people import held_and_waiting, replace_after_approval
from workers.controller import STRICT_WORKFLOW_RUNNER
from workflows.disruption_budget import DisruptionBudget
from workflows.disruption_lease import REASK_EVERY
from workflows.node_remediation import NodeRemediation

FREE = BudgetPolicy(max_disruption="100%", storm_share=1.0)
ONE = BudgetPolicy(max_disruption="1", storm_share=1.0)
REASON = "LeaseAnswered"
# Cordon, drain (the lease), diagnose (the sim fleet finds nothing: recovered), restore.
DRAIN_THEN_DIAGNOSE = Runbook(
    name="drain-then-diagnose",
    match=Match(reasons=[REASON]),
    cordon=True,
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.DIAGNOSE, timeout=timedelta(minutes=1))],
)
WITHIN = timedelta(seconds=90)  # far inside REASK_EVERY: a lost grant would wait for its re-ask


async def ladders(client: Client, queues: Queues, nodes: list[str]) -> list[WorkflowHandle]:
    found = [
        Finding(
            node=n,
            check="test",
            reason=REASON,
            severity=Severity.CRITICAL,
            observed_at=datetime.now(UTC),
        )
        for n in nodes
    ]
    return list(
        await asyncio.gather(*(report(client, queues, f, DRAIN_THEN_DIAGNOSE) for f in found))
    )


async def finished(handles: list[WorkflowHandle]) -> list[RemediationState]:
    results = await asyncio.wait_for(
        asyncio.gather(*(h.result() for h in handles)), WITHIN.total_seconds()
    )
    assert [r.outcome for r in results] == [Outcome.RECOVERED] * len(handles)
    return [await state_of(h) for h in handles]


async def events(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """Every run's (the dev server suggests continue-as-new at 40 events)."""
    return [e for history in await every_run(client, workflow_id) for e in history.events]


async def every_run(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    return [
        await client.get_workflow_handle(run.id, run_id=run.run_id).fetch_history()
        async for run in client.list_workflows(f"WorkflowId = '{workflow_id}'")
    ]


async def grant_signals(client: Client, handle: WorkflowHandle) -> int:
    return sum(
        e.workflow_execution_signaled_event_attributes.signal_name == LEASE_GRANTED.name
        for e in await events(client, handle.id)
    )


async def lease_timers(client: Client, handle: WorkflowHandle) -> list[str]:
    """The summaries of the ladder's timers that wait for a lease (its re-ask)."""
    summaries = [
        pydantic_data_converter.payload_converter.from_payload(e.user_metadata.summary, str)
        for e in await events(client, handle.id)
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and e.user_metadata.HasField("summary")
    ]
    return [s for s in summaries if "lease" in s]


async def answered_updates(client: Client, pool: str) -> int:
    """Lease asks the budget answered, over every run of it."""
    return sum(
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        == ASK_LEASE.name
        for e in await events(client, budget_workflow_id(pool))
    )


async def test_a_free_budget_grants_in_the_answer_and_both_histories_replay(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("answered", 2)
    async with running_workers(client, fleet, policy=FREE) as queues:
        handles = await ladders(client, queues, sorted(fleet.nodes))
        states = await finished(handles)
        signals = [await grant_signals(client, h) for h in handles]
        timers = [await lease_timers(client, h) for h in handles]
        answered = await answered_updates(client, queues.pool)
        ids = [*(h.id for h in handles), budget_workflow_id(queues.pool)]
    # Once the workers are gone and the budget is closed (a history that ends in the middle
    # of a workflow task is not one a replay can finish).
    histories = [history for i in ids for history in await every_run(client, i)]
    assert all(s.lease_granted_at and s.lease_released_at for s in states)
    # Each granted in its request's answer: no signal, no re-ask timer started and cancelled.
    assert signals == [0, 0] and timers == [[], []], (signals, timers)
    assert answered == 2
    for history in histories:  # the ladders' and the budget's with its updates
        await replays(history)


async def test_a_lease_not_free_is_answered_not_yet_and_granted_by_signal_later(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("answered-one", 3)
    step = timedelta(seconds=0.2)  # the dev server's clock is real
    async with running_workers(client, fleet, policy=ONE) as queues:
        # The first holds the pool's one lease, waiting for its approval; the second waits.
        holder, waiter = await held_and_waiting(
            dev_env, queues, fleet, replace_after_approval(), step=step
        )

        async def in_line() -> bool:  # asked, and answered "not yet"
            waiting = (await budget_state(client, queues.pool)).waiting
            return any(w.holder == waiter.id for w in waiting)

        await eventually(in_line, within_s=30)
        await APPROVE.send(holder, ApproveRequest(by="test"))  # it replaces, and lets go
        await wait_for_phase(dev_env, waiter, Phase.AWAITING_APPROVAL, step=step)
        signals = [await grant_signals(client, h) for h in (holder, waiter)]
        answered = await answered_updates(client, queues.pool)
    assert signals == [0, 1], signals  # the holder's in the answer, the waiter's later
    assert answered == 2  # each asked by update; the waiter's answer was "not yet"


async def test_a_burst_past_the_updates_cap_and_a_continue_as_new_loses_no_grant(
    dev_env: WorkflowEnvironment,
) -> None:
    """16 ladders at once against a free budget: more asks in flight than the dev server's
    cap of 10, and a budget past the suggestion to continue as new (40 events here), which it
    does once it falls quiet (workflows/budget_renewal.py). Every ladder gets
    its lease well before a re-ask, by answer or by signal."""
    client = dev_env.client
    fleet = own_fleet("answered-burst", 16)
    async with running_workers(client, fleet, policy=FREE) as queues:
        handles = await ladders(client, queues, sorted(fleet.nodes))
        states = await finished(handles)
        signals = [await grant_signals(client, h) for h in handles]
        budget = client.get_workflow_handle(budget_workflow_id(queues.pool))
        await eventually(lambda: runs_of(client, budget.id), within_s=60)  # it continued
    assert all(s.lease_granted_at and s.lease_released_at for s in states)
    assert all(n <= 1 for n in signals), signals  # told at most once each
    assert max(s.lease_granted_at - s.lease_requested_at for s in states) < REASK_EVERY  # type: ignore[operator]


async def test_no_budget_running_yet_asks_by_signal_which_starts_it(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker: the budget waits, started
    budgets = BudgetActivities(client, lambda _: 4, FREE)
    wanted = LeaseWanted(holder="ladder-x", node="n1", pool=pool, task_queue=queue, answer=True)
    try:
        answer = await budgets.request_lease(wanted)
        started = await client.get_workflow_handle(budget_workflow_id(pool)).describe()
    finally:
        await client.get_workflow_handle(budget_workflow_id(pool)).terminate("test over")
    assert not answer.granted
    assert started.workflow_type == "DisruptionBudget"


async def test_requests_go_by_signal_on_the_time_skipping_server(
    time_env: WorkflowEnvironment, dev_env: WorkflowEnvironment
) -> None:
    assert not await BudgetActivities(time_env.client, lambda _: 4, FREE).answers_by_update()
    assert await BudgetActivities(dev_env.client, lambda _: 4, FREE).answers_by_update()


async def replays(history: WorkflowHistory) -> None:
    replayer = Replayer(
        workflows=[NodeRemediation, DisruptionBudget],
        data_converter=pydantic_data_converter,
        workflow_runner=STRICT_WORKFLOW_RUNNER,
    )
    replay = replayer.replay_workflow(history, raise_on_replay_failure=False)
    result = await asyncio.wait_for(replay, 60)
    assert result.replay_failure is None, result.replay_failure
