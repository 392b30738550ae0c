"""The pool's disruption budget and storm breaker, with real NodeRemediation ladders on the
time-skipping server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.budget import BudgetActivities
from adapters.sim import SimFleet
from chaos.measure import peak_concurrency
from contract.activities import RELEASE_LEASE, REQUEST_LEASE
from contract.messages import APPROVE, CLOSE_BREAKER, LEASE_RELEASE
from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.disruption.budget import (
    BudgetPolicy,
    BudgetState,
    LeaseRelease,
    allowed_disruptions,
    storm,
)
from remedy.disruption.budget_messages import ResumeRequest
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.trust.decisions import ApproveRequest
from tests.breakers import published
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import Handle, local_activities, reasks, report, state_of, wait_for_phase
from tests.test_job_watch import eventually
from workflows.disruption_budget import DisruptionBudget


@pytest.mark.parametrize(
    ("spec", "size", "allowed"),
    [
        ("2", 10, 2),
        ("20%", 3, 1),
        ("20%", 10, 2),
        ("25%", 10, 3),
        ("all-but-1", 8, 7),
        ("all-but-1", 1, 0),
        ("0", 5, 0),
        ("12", 5, 5),
        ("50%", 0, 0),
    ],
)
def test_allowed_disruptions(spec: str, size: int, allowed: int) -> None:
    assert allowed_disruptions(spec, size) == allowed


@pytest.mark.parametrize("spec", ["two", "-1", "all-but-x", "%", "1.5"])
def test_bad_budget_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="not a disruption budget"):
        allowed_disruptions(spec, 10)


def test_storm_needs_a_share_and_a_minimum() -> None:
    assert storm(3, 10, 0.2) and not storm(2, 10, 0.2)
    assert not storm(1, 4, 0.2)  # one bad node in a small pool is a fault, not a storm


def test_peak_concurrency_counts_overlapping_leases_only() -> None:
    t = [datetime(2026, 11, 1, hour=h, tzinfo=UTC) for h in range(6)]
    assert peak_concurrency([(t[0], t[2]), (t[1], t[3]), (t[3], t[4])]) == 2
    assert peak_concurrency([(t[0], t[1]), (t[2], t[3])]) == 1
    assert peak_concurrency([]) == 0


async def budget_state(client: Client, pool: str) -> BudgetState:
    handle = client.get_workflow_handle_for(DisruptionBudget.run, budget_workflow_id(pool))
    return await handle.query(DisruptionBudget.state)


async def test_budget_of_two_never_lets_more_than_two_nodes_be_disrupted(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    findings = [fleet.inject(name, "ecc_dbe", gpu=1) for name in sorted(fleet.nodes)]
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        handles = [
            await report(time_env.client, queues, f, shipped_runbooks.match(f)) for f in findings
        ]
        results = [await h.result() for h in handles]  # one at a time: time skips while waiting
        states = [await state_of(h) for h in handles]
        budget = await budget_state(time_env.client, queues.pool)
        history = await handles[0].fetch_history()
        locals_ = await local_activities(time_env.client, handles[0].id)
    assert [r.outcome for r in results] == [Outcome.RECOVERED] * 10
    leases = [(s.lease_granted_at, s.lease_released_at) for s in states]
    assert all(granted and released for granted, released in leases)
    assert peak_concurrency(leases) == 2  # type: ignore[arg-type]
    assert budget.grants == 10 and budget.holders == [] and budget.waiting == []
    drains = [a for n, a in fleet.actions if a == "drain"]
    assert len(drains) == 10
    # Asked and given back in the ladder's own workflow tasks (local activities): no activity
    # task for the request, no signal from the workflow (and its answer's task) for the release.
    # One request, and one more for each re-ask: on a busy machine the server's clock can pass
    # the 5 min re-ask while the grant is on its way (make test-stress, 2026-12-03).
    calls = [a for a in locals_ if a in (REQUEST_LEASE.name, RELEASE_LEASE.name)]
    requests = [REQUEST_LEASE.name] * (1 + reasks(history))
    assert calls == [*requests, RELEASE_LEASE.name], calls
    kinds = {e.WhichOneof("attributes") for e in history.events}
    assert "signal_external_workflow_execution_initiated_event_attributes" not in kinds
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
    ]
    assert REQUEST_LEASE.name not in scheduled


async def test_a_release_to_a_budget_that_is_gone_is_said_and_done(
    time_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    """No budget (terminated, say): no lease to give back. The release is no failure that a
    ladder's end would retry for ten minutes."""
    activities = BudgetActivities(time_env.client, lambda _: 1, BudgetPolicy())
    gone = LeaseRelease(holder="node-remediation/gpu-0", node="gpu-0", pool="nowhere")
    await ActivityEnvironment().run(activities.release_lease, gone)
    assert "pool nowhere has no budget to give node-remediation/gpu-0 back to" in caplog.text


# Drained, then waiting for an approval that never comes while holding the only lease.
HOLD = Runbook(
    name="hold",
    match=Match(xids=[48]),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)


async def _waiting_behind_a_dead_holder(
    env: WorkflowEnvironment, fleet: SimFleet, queues: Queues
) -> Handle:
    """The first node's ladder holds the pool's only lease (``HOLD``), the second's waits for
    it, and the first is terminated: no release signal ever comes. The waiter's handle."""
    first, second = sorted(fleet.nodes)
    holder = await report(env.client, queues, fleet.inject(first, "ecc_dbe"), HOLD)
    await wait_for_phase(env, holder, Phase.AWAITING_APPROVAL)
    waiter = await report(env.client, queues, fleet.inject(second, "ecc_dbe"), HOLD)
    await wait_for_phase(env, waiter, Phase.AWAITING_LEASE)
    await holder.terminate("operator killed it")
    return waiter


async def test_a_terminated_holder_loses_its_lease_to_the_next_in_line(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    second = sorted(fleet.nodes)[1]
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        waiter = await _waiting_behind_a_dead_holder(time_env, fleet, queues)
        state = await wait_for_phase(time_env, waiter, Phase.AWAITING_APPROVAL)
        assert state.lease_granted_at is not None
        budget = await budget_state(time_env.client, queues.pool)
        await APPROVE.send(waiter, ApproveRequest(by="test"))
        assert (await waiter.result()).outcome is Outcome.RECOVERED
    assert budget.reclaimed == 1
    assert [h.node for h in budget.holders] == [second]


async def test_a_busy_pool_still_reclaims_a_dead_holders_lease(
    time_env: WorkflowEnvironment,
) -> None:
    """Signals every 30 s (a pool whose many waiting ladders ask again) and a sweep every
    minute: the budget used to start its minute afresh after each signal and never swept, so
    a terminated holder kept the only lease for good. The sweep runs on its own clock now."""
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    second = sorted(fleet.nodes)[1]
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0, reclaim_every=timedelta(minutes=1))
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        budget = time_env.client.get_workflow_handle(budget_workflow_id(queues.pool))
        waiter = await _waiting_behind_a_dead_holder(time_env, fleet, queues)
        for _ in range(10):  # 5 minutes of a busy pool: five sweeps due
            await LEASE_RELEASE.send(budget, LeaseRelease(holder="a-ladder-long-gone"))
            await time_env.sleep(timedelta(seconds=30))
        state = await budget_state(time_env.client, queues.pool)
        await waiter.terminate("test over")
    assert state.reclaimed == 1 and [h.node for h in state.holders] == [second]


async def test_storm_breaker_trips_holds_disruption_and_cordons_and_resumes(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """Three nodes of ten go bad one after the other: the first two are cordoned and wait for
    a lease (the breaker pauses disruption); the third, which tips it, is not even cordoned."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    sick = sorted(fleet.nodes)[:3]  # 30 % of the pool at once
    policy = BudgetPolicy(max_disruption="50%", storm_share=0.2, storm_window=timedelta(hours=1))
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        handles = []
        phases = [Phase.TOLERATING, Phase.TOLERATING, Phase.HELD_BY_BREAKER]
        for name, phase in zip(sick, phases, strict=True):
            finding = fleet.inject(name, "ecc_dbe", gpu=0)
            handles.append(await report(time_env.client, queues, finding, tolerating()))
            await wait_for_phase(time_env, handles[-1], phase, step=timedelta(seconds=1))
            await published(time_env, fleet, queues.pool, len(handles))  # what cordons read
        await time_env.sleep(timedelta(minutes=15))  # past the tolerance: they want leases
        for handle in handles[:2]:
            await wait_for_phase(time_env, handle, Phase.AWAITING_LEASE)
        held = await state_of(handles[2])
        budget = await budget_state(time_env.client, queues.pool)
        assert budget.tripped and "3 of 10 nodes unhealthy" in budget.breaker_note
        assert [a for _, a in fleet.actions] == ["cordon"] * 2  # cordoned, nothing disrupted
        assert [n for n in sick if fleet.node(n).unschedulable] == sick[:2]

        answer = await CLOSE_BREAKER.execute(
            time_env.client.get_workflow_handle(budget_workflow_id(queues.pool)),
            ResumeRequest(by="sre-on-call", identity="remedy-cli:sre@host"),
        )
        results = [await h.result() for h in handles]
        after = await budget_state(time_env.client, queues.pool)
    assert held.phase is Phase.HELD_BY_BREAKER and held.cordon is None
    assert held.cordon_asked_of == [queues.pool] and held.cordon_leave == []
    # The answer: the breaker closed, by whom, and the leases the pool granted at once.
    assert answer.note.startswith("resumed by sre-on-call (remedy-cli:sre@host) at ")
    assert (answer.holders, answer.waiting) == (2, 0)  # the third is cordoned first
    assert [r.outcome for r in results] == [Outcome.RECOVERED] * 3
    assert all(("cordon" in [a for n, a in fleet.actions if n == name]) for name in sick)
    assert not after.tripped and "sre-on-call" in after.breaker_note and after.trips == 1


def tolerating() -> Runbook:
    """Cordon, wait a long tolerance window, then the shipped ECC ladder's reset."""
    return Runbook(
        name="tolerate",
        match=Match(xids=[48]),
        tolerance=timedelta(minutes=10),
        ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
    )


async def test_a_new_run_for_a_node_whose_old_run_was_terminated_gets_its_lease(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node = sorted(fleet.nodes)[0]
    runbook = HOLD
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        old = await report(time_env.client, queues, fleet.inject(node, "ecc_dbe"), runbook)
        await wait_for_phase(time_env, old, Phase.AWAITING_APPROVAL)  # holds the only lease
        await old.terminate("operator killed it")  # its lease is not released
        new: Handle = await report(time_env.client, queues, fleet.inject(node, "ecc_dbe"), runbook)
        # Same node, same holder id: the budget hands the node's lease to the run that asks,
        # at once, instead of waiting on a grant that went to the dead run.
        state = await wait_for_phase(
            time_env, new, Phase.AWAITING_APPROVAL, step=timedelta(seconds=1), steps=20
        )
        budget = await budget_state(time_env.client, queues.pool)
        await APPROVE.send(new, ApproveRequest(by="test"))
        assert (await new.result()).outcome is Outcome.RECOVERED
    assert state.lease_granted_at is not None
    assert [h.node for h in budget.holders] == [node] and budget.reclaimed == 0


async def test_a_budget_started_afresh_knows_who_holds_a_lease(
    dev_env: WorkflowEnvironment,
) -> None:
    """The pool's budget is terminated while a ladder holds its only lease. The next request
    starts a new budget run, which learns the holder from the running ladders before it grants
    anything: the cap of one holds across the restart."""
    client = dev_env.client
    fleet = own_fleet("rebuild", 2)
    first, second = sorted(fleet.nodes)
    runbook = Runbook(
        name="hold",
        match=Match(xids=[48]),
        watch=timedelta(0),  # a real-time server: look for the Xid once, no 10-minute watch
        ladder=[
            Rung(action=Action.DRAIN, verify=False),
            Rung(action=Action.RESET_GPU, approval="required"),
        ],
    )
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        holder = await report(client, queues, fleet.inject(first, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, holder, Phase.AWAITING_APPROVAL, step=timedelta(seconds=0.2))
        held = f"RemedyPool = '{queues.pool}' AND RemedyLease = 'held'"
        await eventually(lambda: _listed(client, held))  # visibility has caught up
        await client.get_workflow_handle(budget_workflow_id(queues.pool)).terminate("lost")
        waiter = await report(client, queues, fleet.inject(second, "ecc_dbe"), runbook)
        waiting = await wait_for_phase(
            dev_env, waiter, Phase.AWAITING_LEASE, step=timedelta(seconds=0.2)
        )
        rebuilt = await eventually(lambda: _decided(client, queues.pool, waiter.id))
        still = await state_of(waiter)
        for handle in (holder, waiter):
            await APPROVE.send(handle, ApproveRequest(by="test", rung_number=2, ahead=True))
        results = [await holder.result(), await waiter.result()]
        held_by, waited = await state_of(holder), await state_of(waiter)
    assert [h.holder for h in rebuilt.holders] == [holder.id] and rebuilt.rebuilt
    assert waiting.lease_granted_at is None and still.lease_granted_at is None
    assert [r.outcome for r in results] == [Outcome.RECOVERED] * 2
    assert held_by.lease_released_at and waited.lease_granted_at
    assert waited.lease_granted_at >= held_by.lease_released_at  # never two at once


async def _listed(client: Client, query: str) -> bool:
    return bool([w async for w in client.list_workflows(query)])


async def _decided(client: Client, pool: str, holder: str) -> BudgetState | None:
    """The pool's budget, once a run that rebuilt its holders has decided on ``holder``'s
    request (granted it, or keeps it waiting); None before (the new run may not be up yet)."""
    try:
        state = await budget_state(client, pool)
    except RPCError:
        return None
    asked = [w.holder for w in state.waiting] + [h.holder for h in state.holders]
    return state if state.rebuilt and holder in asked else None
