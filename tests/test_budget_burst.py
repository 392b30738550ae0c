"""A burst of lease requests (issue 31): the pool's budget grants what fits in one workflow
task, sends those grants together and never lets more than the cap hold a lease. The grants
are counted one pass at a time (``grant_waiting``), the same as one by one."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.activities import DELIVER_BUDGET_SIGNALS
from contract.messages import LEASE_GRANTED, LEASE_RELEASE, LEASE_REQUEST
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.core.models import NodeRef, Scope
from remedy.disruption.budget import BudgetPolicy, BudgetState, Lease, LeaseRelease, LeaseRequest
from remedy.disruption.budget_gpus import fits, grant_waiting, take
from remedy.disruption.budget_signals import BudgetSignals
from remedy.ladder.remediation import RemediationInput
from tests.test_disruption_budget import budget_state
from tests.test_job_watch import eventually
from workers.controller import controller_worker
from workflows.node_remediation import NodeRemediation

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _request(i: int, policy: BudgetPolicy, rng: random.Random) -> LeaseRequest:
    gpu = rng.random() < 0.4
    return LeaseRequest(
        holder=f"remediation/n{i % 12}",  # some holders ask again: an upgrade, a re-ask
        node=f"n{i % 12}",
        pool="p",
        task_queue="q",
        scope=Scope.GPU if gpu else Scope.NODE,
        gpus=sorted(rng.sample(range(8), rng.randint(1, 3))) if gpu else [],
        pool_size=12,
        policy=policy,
        pool_gpus=96,
        node_gpus=8,
    )


def _state(rng: random.Random) -> BudgetState:
    policy = BudgetPolicy(
        max_disruption=rng.choice(["1", "3", "50%", "100%"]),
        storm_share=1.0,
        max_gpus_out=rng.choice([None, "2", "10", "30%"]),
    )
    state = BudgetState(pool="p", policy=policy, pool_size=12, pool_gpus=96)
    for i in range(rng.randint(0, 3)):  # leases held already, some on GPUs
        req = _request(i, policy, rng)
        state.holders.append(Lease(**take(state.model_copy(deep=True), req, NOW).model_dump()))
    waiting = [_request(rng.randint(0, 40), policy, rng) for _ in range(rng.randint(0, 15))]
    unique = {r.holder: r for r in waiting}  # the budget keeps one request per holder
    state.waiting = list(unique.values())
    return state


def test_a_pass_grants_what_one_by_one_would() -> None:
    rng = random.Random(31)
    for _ in range(500):
        state = _state(rng)
        one_by_one = state.model_copy(deep=True)
        granted = []
        while one_by_one.waiting and fits(one_by_one, one_by_one.waiting[0]):
            req = one_by_one.waiting.pop(0)
            take(one_by_one, req, NOW)
            granted.append(req)
        assert grant_waiting(state, NOW) == granted
        assert state == one_by_one


def test_a_tripped_breaker_grants_nothing() -> None:
    state = _state(random.Random(1))
    state.tripped = True
    assert grant_waiting(state, NOW) == [] and state.grants == 0


async def idle_ladders(client: Client, pool: str, count: int) -> list[str]:
    """Ladders that ask for nothing themselves: runs on a queue no worker polls (a grant is
    recorded in their history all the same)."""
    idle = f"idle-{uuid.uuid4()}"
    ids = []
    for i in range(count):
        node = NodeRef(name=f"{pool}-n{i:02d}", pool=pool)
        handle = await client.start_workflow(
            NodeRemediation.run,
            RemediationInput(node=node, node_task_queue=idle),
            id=f"burst/{uuid.uuid4()}",
            task_queue=idle,
        )
        ids.append(handle.id)
    return ids


async def _grants_by_task(client: Client, pool: str) -> Counter[int]:
    """The budget's grants, counted by the workflow task that sent them (the input of each
    delivery activity it scheduled: remedy.disruption.budget_signals)."""
    history = await client.get_workflow_handle(budget_workflow_id(pool)).fetch_history()
    by_task: Counter[int] = Counter()
    for e in history.events:
        scheduled = e.activity_task_scheduled_event_attributes
        if scheduled.activity_type.name == DELIVER_BUDGET_SIGNALS.name:
            out = BudgetSignals.model_validate_json(scheduled.input.payloads[0].data)
            by_task[scheduled.workflow_task_completed_event_id] += len(out.grants)
    return by_task


async def test_a_burst_is_granted_within_the_cap_in_few_workflow_tasks(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    nodes, cap = 30, 10
    pool, queue = f"pool-{uuid.uuid4().hex[:8]}", f"test-{uuid.uuid4()}"
    fleet = SimFleet(nodes=1, pool=pool)
    policy = BudgetPolicy(max_disruption=str(cap), storm_share=1.0)
    holders = await idle_ladders(client, pool, nodes)
    # Every request is in before the budget runs a single workflow task: one burst.
    for i, holder in enumerate(holders):
        req = LeaseRequest(
            holder=holder, node=f"{pool}-n{i:02d}", pool=pool, task_queue=queue, pool_size=nodes
        )
        await client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=pool, policy=policy),
            id=budget_workflow_id(pool),
            task_queue=queue,
            **LEASE_REQUEST.start_with(req.model_copy(update={"policy": policy})),
        )
    peak, released = 0, 0
    budget = client.get_workflow_handle(budget_workflow_id(pool))
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with controller_worker(client, fleet.cluster, executor, queue, policy):
            while released < nodes:

                async def granted(want: int = min(released + cap, nodes)) -> BudgetState | None:
                    state = await budget_state(client, pool)
                    return state if state.grants >= want else None

                state = await eventually(granted)
                peak = max(peak, len(state.holders))
                # Every holder done at once: the grants follow the releases as they come.
                await asyncio.gather(
                    *(
                        LEASE_RELEASE.send(budget, LeaseRelease(holder=lease.holder))
                        for lease in state.holders
                    )
                )
                released += len(state.holders)
    by_task = await _grants_by_task(client, pool)
    assert peak == cap  # the cap held, and was used
    assert sum(by_task.values()) == nodes  # every holder was told, once
    first_burst = by_task[min(by_task)]
    assert first_burst == cap, by_task  # the burst's grants went out together, in one task


async def test_a_grant_to_a_holder_that_is_gone_frees_its_lease_for_the_next(
    time_env: WorkflowEnvironment,
) -> None:
    """The delivery activity finds the first holder gone (never ran, or closed): the budget
    takes its lease back and grants the next in line, who is told."""
    client = time_env.client
    pool, queue = f"pool-{uuid.uuid4().hex[:8]}", f"test-{uuid.uuid4()}"
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    (waiter,) = await idle_ladders(client, pool, 1)
    for i, holder in enumerate([f"burst/{uuid.uuid4()}", waiter]):  # the first never ran
        req = LeaseRequest(
            holder=holder, node=f"{pool}-n{i}", pool=pool, task_queue=queue, pool_size=2
        )
        await client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=pool, policy=policy),
            id=budget_workflow_id(pool),
            task_queue=queue,
            **LEASE_REQUEST.start_with(req.model_copy(update={"policy": policy})),
        )
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with controller_worker(client, SimFleet(nodes=1, pool=pool).cluster, executor, queue):

            async def both_granted() -> BudgetState | None:
                state = await budget_state(client, pool)
                return state if state.grants == 2 and not state.waiting else None

            state = await eventually(both_granted)
    assert [h.holder for h in state.holders] == [waiter]
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        async for e in client.get_workflow_handle(waiter).fetch_history_events()
    ]
    assert signals.count(LEASE_GRANTED.name) == 1
