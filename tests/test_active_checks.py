"""Active checks on a schedule: a round over a pool deep-diagnoses its idle nodes past their
interval, takes busy ones past their max age out under the disruption budget, leaves recently
checked ones alone, and hands a failed check to the node's ladder."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
import typer
from temporalio.client import Client, ScheduleOverlapPolicy, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.node import NodeActivities
from adapters.sim import SimFleet
from contract import activities as act
from contract.messages import BUDGET_STATE, REMEDIATION_STATE
from contract.names import (
    active_checks_workflow_id,
    budget_workflow_id,
    remediation_workflow_id,
)
from remedy.core.models import ProbeReport, ProbeRequest
from remedy.detection.conditions import GPU_ACTIVE_CHECK, NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import (
    NOT_CHECKED,
    PASSED,
    ActiveCheckPolicy,
    ActiveChecksInput,
    CheckResult,
    NodeWorkload,
    RoundSummary,
    Workloads,
    active_check_condition,
    due_nodes,
    plan_round,
)
from remedy.scan.fleet import NodeStatus, OpenWork, status_of
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import report, wait_for_phase, wait_until
from workers.cli.active_checks import active_check_policies
from workers.schedules import active_checks_schedule, ensure_active_checks
from workflows.active_checks import ActiveChecks

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _check(
    at: datetime, status: Literal["True", "False", "Unknown"] = "False", reason: str = PASSED
) -> NodeCondition:
    return NodeCondition(
        type=GPU_ACTIVE_CHECK,
        status=status,
        reason=reason,
        message="",
        last_heartbeat_time=at,
        last_transition_time=at,
    )


# -- the plan, pure ----------------------------------------------------------------------------
def test_due_nodes_follow_interval_max_age_and_the_last_verdict() -> None:
    policy = ActiveCheckPolicy(interval=timedelta(days=1), max_age=timedelta(days=7))
    nodes = [
        NodeFacts(name="recent", pool="p", active_check=_check(NOW - timedelta(hours=3))),
        NodeFacts(name="day-old", pool="p", active_check=_check(NOW - timedelta(days=2))),
        NodeFacts(name="week-old", pool="p", active_check=_check(NOW - timedelta(days=8))),
        NodeFacts(
            name="failed",
            pool="p",
            active_check=_check(NOW - timedelta(hours=1), "True", "FailsUnderLoad"),
        ),
        NodeFacts(
            name="first-seen",
            pool="p",
            active_check=_check(NOW - timedelta(hours=1), "Unknown", NOT_CHECKED),
        ),
        NodeFacts(name="never-seen", pool="p"),
        NodeFacts(name="theirs", pool="p", unschedulable=True),
        NodeFacts(name="opted-out", pool="p", managed=False),
        NodeFacts(name="new", pool="p", awaiting_admission=True),
    ]
    due = {d.name: d.stale for d in due_nodes(nodes, policy, NOW)}
    assert due == {
        "day-old": False,
        "week-old": True,
        "failed": True,
        "first-seen": False,
        "never-seen": False,
    }
    workloads = Workloads(
        nodes={
            "day-old": NodeWorkload(gpu_pods=0),
            "week-old": NodeWorkload(gpu_pods=2),
            "failed": NodeWorkload(gpu_pods=None),  # unknown counts as busy
            "first-seen": NodeWorkload(gpu_pods=1),
            "never-seen": NodeWorkload(held_by="node-remediation/never-seen"),
        }
    )
    plan = plan_round(due_nodes(nodes, policy, NOW), workloads)
    assert plan.idle == ["day-old"]
    assert plan.take_out == ["failed", "week-old"]
    assert plan.waiting == ["first-seen"]
    assert plan.held == ["never-seen"]


def test_the_condition_heartbeat_is_the_last_check_and_its_transition_the_last_change() -> None:
    healthy = ProbeReport(node="n", checks_run=["inventory", "load"], started_at=NOW)
    first = active_check_condition(None, None, NOW)
    assert (first.status, first.reason) == ("Unknown", NOT_CHECKED)
    assert active_check_condition(None, first, NOW + timedelta(days=1)) is first  # seen already
    passed = active_check_condition(healthy, first, NOW + timedelta(days=1))
    again = active_check_condition(healthy, passed, NOW + timedelta(days=2))
    assert (again.status, again.reason) == ("False", PASSED)
    assert again.last_heartbeat_time == NOW + timedelta(days=2)
    assert again.last_transition_time == NOW + timedelta(days=1)


def test_a_node_under_its_check_is_not_an_orphaned_cordon_for_the_scan() -> None:
    node = NodeFacts(name="n", pool="p", unschedulable=True, cordoned_by_remedy=True)
    assert status_of(node, OpenWork()) is NodeStatus.NEEDS_HUMAN
    assert status_of(node, OpenWork(checking=["n"])) is NodeStatus.IN_REMEDIATION


def test_a_failed_check_condition_does_not_start_a_second_ladder_from_the_scan() -> None:
    fleet = SimFleet(nodes=1)
    [node] = fleet.nodes
    failed = _check(NOW, "True", "FailsUnderLoad")
    fleet.cluster.marks.set_conditions(node, [failed])
    [facts] = fleet.cluster.fleet.nodes()
    assert facts.problems == [] and facts.active_check == failed


def test_controller_options_give_a_policy_per_pool() -> None:
    policies = active_check_policies("1h", "1d", "7d", ["training=12h/3d"])
    assert policies is not None
    default, per_pool = policies
    assert default.interval == timedelta(days=1) and default.max_age == timedelta(days=7)
    assert per_pool["training"].max_age == timedelta(days=3)
    assert per_pool["training"].every == timedelta(hours=1)
    assert active_check_policies("0", "1d", "7d", None) is None
    with pytest.raises(typer.Exit):
        active_check_policies("1h", "1d", "7d", ["training=12h"])


def test_the_schedule_runs_one_round_per_pool_and_skips_while_one_runs() -> None:
    inp = ActiveChecksInput(pool="gpu-a", policy=ActiveCheckPolicy(every=timedelta(minutes=30)))
    schedule = active_checks_schedule(inp, "q")
    assert schedule.spec.intervals[0].every == timedelta(minutes=30)
    assert schedule.policy.overlap is ScheduleOverlapPolicy.SKIP
    assert schedule.action.id == active_checks_workflow_id("gpu-a")  # type: ignore[attr-defined]


# -- rounds on the time-skipping server ----------------------------------------------------------
def _mark(fleet: SimFleet, node: str, condition: NodeCondition) -> None:
    fleet.cluster.marks.set_conditions(node, [condition])


def mark_checked(fleet: SimFleet, nodes: list[str], ago: timedelta) -> None:
    """These nodes passed their last check ``ago``."""
    for node in nodes:
        _mark(fleet, node, _check(datetime.now(UTC) - ago))


async def _round(client: Client, queues: Queues, policy: ActiveCheckPolicy) -> RoundSummary:
    return await client.execute_workflow(
        ActiveChecks.run,
        ActiveChecksInput(pool=queues.pool, policy=policy, node_task_queue=queues.agents),
        id=f"{active_checks_workflow_id(queues.pool)}-{uuid.uuid4().hex[:6]}",
        task_queue=queues.controller,
    )


def _results(summary: RoundSummary) -> dict[str, CheckResult]:
    return {r.node: r.result for r in summary.results}


async def test_idle_nodes_past_their_interval_are_checked_and_a_failure_starts_its_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=5, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    idle, failing, recent, busy, unseen = sorted(fleet.nodes)
    now = datetime.now(UTC)
    for node in (idle, failing, recent):
        fleet.idle(node)
    for node in (idle, failing, busy):
        _mark(fleet, node, _check(now - timedelta(days=2)))
    _mark(fleet, recent, _check(now - timedelta(hours=1)))
    # A GPU that answers every query and raises no Xid: only load finds it.
    fleet.inject(failing, "silent_under_load", gpu=1)
    async with running_workers(time_env.client, fleet) as queues:
        # Both due idle nodes at once (the default cap, 20 % of 5 nodes, would check one).
        summary = await _round(time_env.client, queues, ActiveCheckPolicy(idle_at_once="2"))
        ladder = time_env.client.get_workflow_handle(remediation_workflow_id(failing))
        ladder_state = await REMEDIATION_STATE.ask(ladder)
    assert _results(summary) == {idle: CheckResult.PASSED, failing: CheckResult.FAILED}
    assert summary.plan.waiting == [busy, unseen]  # busy, and not past the max age
    [failed] = [r for r in summary.results if r.node == failing]
    assert failed.remediation == remediation_workflow_id(failing)
    assert [f.reason for f in ladder_state.findings] == ["FailsUnderLoad"]
    assert ladder_state.findings[0].component.index == 1
    # The passed node went back to work; the failed one stays cordoned for its ladder.
    assert [a for a in fleet.actions if a[0] == idle] == [(idle, "cordon"), (idle, "restore")]
    assert (failing, "restore") not in fleet.actions
    assert not any(node in (recent, busy, unseen) for node, _ in fleet.actions)
    conditions = {n: fleet.nodes[n].conditions[GPU_ACTIVE_CHECK] for n in fleet.nodes}
    assert conditions[idle].status == "False" and conditions[idle].last_heartbeat_time > now
    assert (conditions[failing].status, conditions[failing].reason) == ("True", "FailsUnderLoad")
    assert conditions[recent].last_heartbeat_time < now  # left alone
    assert (conditions[unseen].status, conditions[unseen].reason) == ("Unknown", NOT_CHECKED)


async def test_busy_stale_nodes_are_taken_out_one_at_a_time_under_a_budget_of_one(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=4, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, fresh_a, fresh_b = sorted(fleet.nodes)
    now = datetime.now(UTC)
    for node in (first, second):
        _mark(fleet, node, _check(now - timedelta(days=8)))
    for node in (fresh_a, fresh_b):
        _mark(fleet, node, _check(now - timedelta(hours=1)))
    policy = BudgetPolicy(max_disruption="1")
    async with running_workers(time_env.client, fleet, policy=policy) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())
    assert _results(summary) == {first: CheckResult.PASSED, second: CheckResult.PASSED}
    assert summary.plan.take_out == [first, second]
    out, most = set(), 0
    for node, action in fleet.actions:
        if action == "cordon":
            out.add(node)
        elif action == "restore":
            out.discard(node)
        most = max(most, len(out))
    assert most == 1 and out == set()
    assert {n for n, a in fleet.actions if a == "drain"} == {first, second}
    assert all(not n.unschedulable for n in fleet.nodes.values())


async def test_a_busy_node_with_no_lease_waits_for_the_next_round_and_is_not_taken_out(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=2, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    stale, fresh = sorted(fleet.nodes)
    now = datetime.now(UTC)
    _mark(fleet, stale, _check(now - timedelta(days=8)))
    _mark(fleet, fresh, _check(now - timedelta(hours=1)))
    # The budget allows no node out: every lease goes on waiting.
    async with running_workers(
        time_env.client, fleet, policy=BudgetPolicy(max_disruption="0")
    ) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())
        budget = time_env.client.get_workflow_handle(budget_workflow_id(queues.pool))
        budget_state = await BUDGET_STATE.ask(budget)
    assert _results(summary) == {stale: CheckResult.DEFERRED}
    assert fleet.actions == []  # neither cordoned nor drained
    assert budget_state.waiting == [] and budget_state.holders == []  # the request given back
    assert fleet.nodes[stale].conditions[GPU_ACTIVE_CHECK].last_heartbeat_time < now


async def test_the_pool_schedule_finds_a_fault_no_probe_sees_on_a_real_server(
    dev_env: WorkflowEnvironment,
) -> None:
    """The schedule's rounds on the dev server: a node never checked and idle gets its deep
    diagnose, and its silent fault becomes a ladder, with no agent reporting anything."""
    client = dev_env.client
    fleet = own_fleet("active", 2)
    silent, busy = sorted(fleet.nodes)
    fleet.idle(silent)
    fleet.inject(silent, "silent_under_load", gpu=0)
    async with running_workers(client, fleet) as queues:
        schedule_id = await ensure_active_checks(
            client,
            ActiveChecksInput(
                pool=queues.pool,
                policy=ActiveCheckPolicy(every=timedelta(seconds=1)),
                node_task_queue=queues.agents,
            ),
            queues.controller,
            schedule_id=f"checks-{uuid.uuid4().hex[:8]}",
        )
        try:
            ladder = await _started(client, remediation_workflow_id(silent))
            state = await REMEDIATION_STATE.ask(ladder)
        finally:
            await client.get_schedule_handle(schedule_id).delete()
    assert [f.reason for f in state.findings] == ["FailsUnderLoad"]
    assert fleet.nodes[silent].conditions[GPU_ACTIVE_CHECK].status == "True"
    assert fleet.nodes[busy].conditions[GPU_ACTIVE_CHECK].reason == NOT_CHECKED
    assert not [a for n, a in fleet.actions if n == busy]


async def _started(
    client: Client, workflow_id: str, within_s: float = 30
) -> WorkflowHandle[Any, Any]:
    """Wait (real time: the dev server does not skip) until the workflow exists."""
    handle = client.get_workflow_handle(workflow_id)
    for _ in range(int(within_s * 10)):
        with contextlib.suppress(RPCError):
            await handle.describe()
            return handle
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id} did not start within {within_s}s")


async def test_a_ladder_that_began_during_the_check_keeps_the_cordon(
    time_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """The agent reports an Xid while the load runs: the ladder's cordon finds the check's, so
    the check that then passes must not give the node back under the ladder."""
    client = time_env.client
    fleet = SimFleet(nodes=2, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node, other = sorted(fleet.nodes)
    fleet.idle(node)
    _mark(fleet, node, _check(datetime.now(UTC) - timedelta(days=2)))
    _mark(fleet, other, _check(datetime.now(UTC)))
    agent = NodeActivities(fleet.host)
    async with running_workers(client, fleet, agents=False) as queues:

        @act.DEEP_DIAGNOSE.defn
        async def deep_diagnose(req: ProbeRequest) -> ProbeReport:
            finding = fleet.inject(node, "ecc_dbe", gpu=0)  # the Xid arrives mid-load
            handle = await report(client, queues, finding, shipped_runbooks.match(finding))
            # The ladder took the check's cordon as its own once it asks for its lease (a
            # phase that can pass between two polls on a busy machine: CI, 2026-12-02).
            asked = "a ladder that asked for its lease"
            await wait_until(
                time_env, handle, lambda s: s.lease_requested_at is not None, asked, timedelta(0)
            )
            return ProbeReport(node=node, checks_run=["inventory", "load"], started_at=NOW)

        others = [a for a in agent.all() if a != agent.deep_diagnose]
        with ThreadPoolExecutor(max_workers=2) as executor:
            async with Worker(
                client,
                task_queue=queues.agents,
                activities=[*others, deep_diagnose],
                activity_executor=executor,
            ):
                summary = await _round(client, queues, ActiveCheckPolicy())
                ladder = client.get_workflow_handle(remediation_workflow_id(node))
                done = await wait_for_phase(time_env, ladder, Phase.DONE)
    assert _results(summary) == {node: CheckResult.PASSED}
    assert done.outcome is Outcome.RECOVERED, done.outcome_detail
    actions = [a for n, a in fleet.actions if n == node]
    assert actions[0] == "cordon" and "reset_gpu" in actions
    assert actions.count("restore") == 1  # the ladder's, once the node recovered
    assert actions.index("restore") > actions.index("reset_gpu")
