"""Approvals nobody answers, with real ladders and the pool's real budget: the pool says it is
held by people (the budget's details, `remedy status`, the metrics) with the commands that free
it; a runbook's ``on_approval_timeout`` decides what the silence comes to; and a budget started
afresh serves its waiters in the order they asked."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import APPROVE
from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.disruption import held_by_people
from remedy.disruption.budget import BudgetPolicy, BudgetState
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.runbook.authored import OnApprovalTimeout
from remedy.trust.decisions import ApproveRequest
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.servers import finished
from tests.test_cli import cli
from tests.test_disruption_budget import _decided, _listed, budget_state
from tests.test_fleet_scan import scan_every_second
from tests.test_job_watch import eventually
from tests.test_metrics import free_port, scrape, value
from workers.client import connect, metrics_runtime

HOUR = timedelta(hours=1)
# One lease at a time, the reclaim timer rare: the hours a test waits stay few workflow tasks.
ONE_AT_A_TIME = BudgetPolicy(max_disruption="1", storm_share=1.0, reclaim_every=HOUR)


def replace_after_approval(
    on_timeout: OnApprovalTimeout = OnApprovalTimeout.NEEDS_HUMAN, **approval: object
) -> Runbook:
    """Drained (the pool's one lease taken), then a replacement that waits for a person."""
    return Runbook(
        name="replace-after-approval",
        match=Match(xids=[48]),
        watch=timedelta(0),  # real-time servers too: look for the Xid once
        ladder=[
            Rung(action=Action.DRAIN),
            Rung(
                action=Action.REPLACE,
                approval="required",
                on_approval_timeout=on_timeout,
                **approval,  # type: ignore[arg-type]
            ),
        ],
    )


async def held_and_waiting(
    env: WorkflowEnvironment,
    queues: Queues,
    fleet: SimFleet,
    runbook: Runbook,
    step: timedelta = timedelta(seconds=5),
) -> tuple[Handle, Handle]:
    """The first node's ladder holds the pool's one lease, waiting for its approval; the
    second's waits for the lease behind it. ``step``: as wait_for_phase's (short on the dev
    server, whose clock is real)."""
    first, second = sorted(fleet.nodes)[:2]
    holder = await report(env.client, queues, fleet.inject(first, "ecc_dbe"), runbook)
    await wait_for_phase(env, holder, Phase.AWAITING_APPROVAL, step=step)
    waiter = await report(env.client, queues, fleet.inject(second, "ecc_dbe"), runbook)
    await wait_for_phase(env, waiter, Phase.AWAITING_LEASE, step=step)
    return holder, waiter


async def details(client: Client, workflow_id: str) -> str:
    handle = client.get_workflow_handle(workflow_id)
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def test_an_unanswered_approval_holds_the_pool_until_release_gives_its_share_back(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    fleet = SimFleet(nodes=3, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, _ = sorted(fleet.nodes)
    runbook = replace_after_approval(OnApprovalTimeout.RELEASE, approval_timeout=HOUR)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        holder, waiter = await held_and_waiting(time_env, queues, fleet, runbook)
        held = await budget_state(client, pool)
        said = await details(client, budget_workflow_id(pool))
        await time_env.sleep(HOUR)  # nobody answered: the share goes back, the node stays out
        moved = await wait_for_phase(time_env, waiter, Phase.AWAITING_APPROVAL)
        after = await budget_state(client, pool)
        left = await finished(time_env, holder)  # the clock locked: the second one waits
    assert [(w.node, w.what) for w in held.waiting_for_human] == [(first, "approval for replace")]
    assert held_by_people.seized(held) and [w.node for w in held.waiting] == [second]
    assert f"ALERT pool {pool} is held by people: 1 of 1 shares wait for a person" in said
    assert "; 2 of 3 nodes out of scheduling" in said  # the holder, and the cordoned waiter
    assert f"`remedy approve {first}`, or `remedy abort {first} --reason WHY && " in said
    assert f"remedy release-hold {first} --pool {pool}`" in said
    # After the timeout: the first node is left for a person, cordoned, its share given back.
    assert left.outcome is Outcome.NEEDS_HUMAN and "given back" in left.detail
    assert left.attempts[-1].result is AttemptResult.APPROVAL_TIMED_OUT
    assert fleet.node(first).unschedulable and moved.lease_granted_at is not None
    assert [(h.node, h.counted) for h in after.held] == [(first, False)]
    assert [h.node for h in after.holders] == [second] and after.in_use == 1
    assert [w.node for w in after.waiting_for_human] == [second]  # now the second one waits
    assert held_by_people.out_of_scheduling(after) == [first, second]


async def test_an_unanswered_approval_can_skip_its_rung_and_the_budget_hears_the_wait_end(
    time_env: WorkflowEnvironment,
) -> None:
    """A reset nobody approves is skipped; the reboot after it waits for its own approval."""
    client = time_env.client
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node = sorted(fleet.nodes)[0]
    runbook = Runbook(
        name="skip-the-reset",
        match=Match(xids=[48]),
        watch=timedelta(0),
        ladder=[
            Rung(action=Action.DRAIN),
            Rung(
                action=Action.RESET_GPU,
                approval="required",
                approval_timeout=HOUR,
                on_approval_timeout=OnApprovalTimeout.SKIP,
            ),
            Rung(action=Action.REBOOT, approval="required"),
        ],
    )
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), runbook)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        before = await budget_state(client, queues.pool)
        await time_env.sleep(HOUR)
        state = await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        later = await budget_state(client, queues.pool)
        await APPROVE.send(handle, ApproveRequest(by="test"))
        result = await handle.result()
    assert [w.what for w in before.waiting_for_human] == ["approval for reset_gpu"]
    assert state.rung == 2  # the reboot's approval now
    assert [w.what for w in later.waiting_for_human] == ["approval for reboot"]
    skipped = next(a for a in result.attempts if a.action is Action.RESET_GPU)
    assert skipped.result is AttemptResult.APPROVAL_TIMED_OUT and "rung skipped" in skipped.detail
    assert result.outcome is Outcome.RECOVERED  # the reboot fixed it
    assert [a for n, a in fleet.actions if n == node and a in ("reset_gpu", "reboot")] == ["reboot"]


async def test_wait_has_no_deadline(time_env: WorkflowEnvironment) -> None:
    client = time_env.client
    fleet = SimFleet(nodes=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node = sorted(fleet.nodes)[0]
    runbook = replace_after_approval(OnApprovalTimeout.WAIT)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), runbook)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        await time_env.sleep(timedelta(hours=12))  # thrice the default approval_timeout
        waiting = await state_of(handle)
        await APPROVE.send(handle, ApproveRequest(by="test"))
        result = await handle.result()
    assert waiting.phase is Phase.AWAITING_APPROVAL
    assert result.outcome is Outcome.REPLACED


async def test_remedy_status_and_the_metrics_say_the_pool_is_held_by_people(
    dev_env: WorkflowEnvironment,
) -> None:
    """On the dev server, with a fleet scan: `remedy status` names the node waiting for its
    approval, since when, and prints the commands; the gauges say so. Approved with the
    printed command, the pool moves: the next ladder gets the lease."""
    address = dev_env.client.service_client.config.target_host
    port = free_port()
    client = await connect(address, runtime=metrics_runtime(f"127.0.0.1:{port}", "controller"))
    fleet = own_fleet("people", 3)
    first, second, _ = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    runbook = replace_after_approval()  # the default 4h approval_timeout: never reached here
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    step = timedelta(seconds=0.2)
    async with running_workers(client, fleet, policy=policy) as queues:
        pool = queues.pool
        holder = await report(client, queues, fleet.inject(first, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, holder, Phase.AWAITING_APPROVAL, step=step)
        waiter: Handle = await report(client, queues, fleet.inject(second, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, waiter, Phase.AWAITING_LEASE, step=step)
        await eventually(lambda: _seized(client, pool))
        await scan_every_second(client, queues, schedule_id)
        try:
            status = ("status", "--address", address, "--schedule", schedule_id, "--pool", pool)
            shown = await eventually(lambda: _scanned(*status, "--json"), within_s=30)
            code, text = await cli(*status)
            lines = await eventually(lambda: _gauges(port, pool, seized=1))
            approved = await cli("approve", first, "--address", address)
            replaced = await holder.result()
            await wait_for_phase(dev_env, waiter, Phase.AWAITING_APPROVAL, step=step)
            after_code, after = await cli(*status)
        finally:
            await client.get_schedule_handle(schedule_id).delete()
    [row] = shown["pools"]
    assert row["seized"] and [h["node"] for h in row["held_by_people"]] == [first]
    assert code == 0, text
    assert (
        f"ALERT pool {pool} is held by people: 1 of 1 shares wait for a person, "
        "1 ladder waits behind them"
    ) in text
    assert f"      {first}: approval for replace since " in text
    assert f"          remedy approve {first}\n" in text
    assert (
        f"          remedy abort {first} --reason WHY && remedy release-hold {first} --pool {pool}"
    ) in text
    assert "1 SEIZED" in text  # the pools table's people column
    assert value(lines, "remedy_leases_held_by_waiting_for_human", pool=pool) == 1
    assert approved[0] == 0 and replaced.outcome is Outcome.REPLACED
    # The second node now holds the lease and waits for its own approval; nobody behind it.
    assert after_code == 0 and f"pool {pool}: 1 of 1 shares held by people" in after
    assert f"      {second}: approval for replace since " in after and "ALERT pool" not in after


async def _seized(client: Client, pool: str) -> BudgetState | None:
    state = await budget_state(client, pool)
    return state if held_by_people.seized(state) else None


async def _scanned(*args: str) -> dict[str, object] | None:
    """`remedy status --json`, once a scan has completed (None before)."""
    code, out = await cli(*args)
    if code == 2:
        return None
    shown: dict[str, object] = json.loads(out)
    return shown if shown["scanned_at"] and shown["pools"] else None


async def _gauges(port: int, pool: str, seized: int) -> list[str] | None:
    lines = await asyncio.to_thread(scrape, port)
    return lines if value(lines, "remedy_pool_held_by_people", pool=pool) == seized else None


async def test_a_budget_started_afresh_serves_its_waiters_in_the_order_they_asked(
    dev_env: WorkflowEnvironment,
) -> None:
    """The budget is terminated while one ladder holds the only lease (waiting for an
    approval) and three wait behind it. The next request starts a new run, which rebuilds the
    holder, its wait for a person, and the three waiters in their order, the newcomer last;
    the holder approved, the first waiter gets the lease at once (not at its next re-ask)."""
    client = dev_env.client
    fleet = own_fleet("rebuild-waiters", 5)
    nodes = sorted(fleet.nodes)
    runbook = replace_after_approval()
    step = timedelta(seconds=0.2)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        handles: list[Handle] = []
        phases = [Phase.AWAITING_APPROVAL, *[Phase.AWAITING_LEASE] * 3]
        for node, phase in zip(nodes[:4], phases, strict=True):
            handles.append(await report(client, queues, fleet.inject(node, "ecc_dbe"), runbook))
            await wait_for_phase(dev_env, handles[-1], phase, step=step)
        waiting = f"RemedyPool = '{pool}' AND RemedyPhase = 'awaiting_disruption_lease'"
        await eventually(lambda: _listed_all(client, waiting, 3))  # visibility caught up
        await eventually(lambda: _listed(client, f"RemedyPool = '{pool}' AND RemedyLease = 'held'"))
        await client.get_workflow_handle(budget_workflow_id(pool)).terminate("lost")
        last = await report(client, queues, fleet.inject(nodes[4], "ecc_dbe"), runbook)
        handles.append(last)
        rebuilt = await eventually(lambda: _decided(client, pool, last.id))
        await APPROVE.send(handles[0], ApproveRequest(by="test"))
        nxt = await wait_for_phase(dev_env, handles[1], Phase.AWAITING_APPROVAL, step=step)
    assert rebuilt.rebuilt and [h.node for h in rebuilt.holders] == [nodes[0]]
    assert [w.node for w in rebuilt.waiting] == nodes[1:]  # in the order they asked
    assert [(w.node, w.what) for w in rebuilt.waiting_for_human] == [
        (nodes[0], "approval for replace")
    ]
    assert all(w.cordoned for w in rebuilt.waiting)  # out of scheduling while they wait
    assert nxt.lease_granted_at is not None


async def _listed_all(client: Client, query: str, count: int) -> bool:
    return len([w async for w in client.list_workflows(query)]) == count


async def test_a_budget_started_afresh_does_not_count_a_node_whose_share_went_back(
    dev_env: WorkflowEnvironment,
) -> None:
    """An approval no one answered gave its node's share back (``release``); the budget is
    then terminated. The new run finds the node under remedy's cordon, out of scheduling, and
    from the ladder's last ``RemedyLease`` that its share is not the cap's: the next node's
    ladder gets the lease at once."""
    client = dev_env.client
    fleet = own_fleet("given-back", 2)
    first, second = sorted(fleet.nodes)
    quick = timedelta(seconds=1)
    runbook = replace_after_approval(OnApprovalTimeout.RELEASE, approval_timeout=quick)
    step = timedelta(seconds=0.2)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        left = await report(client, queues, fleet.inject(first, "ecc_dbe"), runbook)
        assert (await left.result()).outcome is Outcome.NEEDS_HUMAN
        gone = f"RemedyPool = '{pool}' AND RemedyLease = 'given-back'"
        await eventually(lambda: _listed(client, gone))  # visibility caught up
        await client.get_workflow_handle(budget_workflow_id(pool)).terminate("lost")
        patient = replace_after_approval()  # its approval waits while the test looks
        nxt = await report(client, queues, fleet.inject(second, "ecc_dbe"), patient)
        rebuilt = await eventually(lambda: _decided(client, pool, nxt.id))
        state = await wait_for_phase(dev_env, nxt, Phase.AWAITING_APPROVAL, step=step)
    assert rebuilt.rebuilt and [(h.node, h.counted) for h in rebuilt.held] == [(first, False)]
    assert state.lease_granted_at is not None and fleet.node(first).unschedulable


async def test_the_printed_abort_then_release_hold_frees_the_share_and_keeps_the_node_out(
    dev_env: WorkflowEnvironment,
) -> None:
    """The second command `remedy status` prints for a ladder waiting for a person, run as
    printed: the ladder stops with its node cordoned, the hold goes, the next ladder goes on."""
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("abort-release", 2)
    first, second = sorted(fleet.nodes)
    runbook = replace_after_approval()
    step = timedelta(seconds=0.2)
    async with running_workers(client, fleet, policy=ONE_AT_A_TIME) as queues:
        pool = queues.pool
        holder = await report(client, queues, fleet.inject(first, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, holder, Phase.AWAITING_APPROVAL, step=step)
        waiter = await report(client, queues, fleet.inject(second, "ecc_dbe"), runbook)
        await wait_for_phase(dev_env, waiter, Phase.AWAITING_LEASE, step=step)
        [row] = held_by_people.held_by_people(await budget_state(client, pool))
        abort, release = row.commands[1].replace("WHY", "vendor-ticket").split(" && ")
        aborted = await cli(*abort.split()[1:], "--address", address)
        released = await cli(*release.split()[1:], "--address", address)
        state = await wait_for_phase(dev_env, waiter, Phase.AWAITING_APPROVAL, step=step)
    assert aborted[0] == 0 and released[0] == 0, (aborted, released)
    assert fleet.node(first).unschedulable  # still out, for the person who stopped it
    assert state.lease_granted_at is not None
