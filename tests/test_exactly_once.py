"""Ladders under lost answers, outages and stale reports (time-skipping server, the real
workflows and activities over the simulated fleet): no disruptive action twice, no ladder lost,
no node cordoned and owned by nobody, nothing started by a report already handled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import (
    Client,
    DescribeWorkflowInput,
    Interceptor,
    OutboundInterceptor,
    WorkflowExecutionDescription,
)
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.cluster import REMEDY_CORDON
from contract.messages import APPROVE
from contract.names import budget_workflow_id
from remedy.core.errors import PermissionDenied, TransientError
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.scan.orphans import orphaned_cordon
from remedy.trust.decisions import ApproveRequest
from tests.conftest import running_workers
from tests.ladder import remediate, report, state_of, wait_for_phase

NODE = "gpu-node-000"
DONE, VERIFIED = AttemptResult.DONE, AttemptResult.VERIFIED


def ladder_of(*actions: Action, xids: list[int], approve_last: bool = False) -> Runbook:
    """Every rung but the last prepares (not verified), so the ladder climbs all of them."""
    rungs = [Rung(action=a, verify=False) for a in actions[:-1]] + [Rung(action=actions[-1])]
    if approve_last:
        rungs[-1] = Rung(action=actions[-1], approval="required")
    return Runbook(name="test-ladder", match=[Match(xids=xids)], ladder=rungs)


@pytest.mark.parametrize(
    ("fault", "actions", "lost"),
    [
        ("ecc_dbe", (Action.DRAIN, Action.RESET_GPU), ["drain", "reset_gpu"]),
        ("gpu_lost", (Action.DRAIN, Action.REBOOT), ["drain", "reboot"]),
        ("mcu_halt", (Action.KILL_JOB, Action.RESET_GPU), ["kill_job", "reset_gpu"]),
    ],
    ids=["reset", "reboot", "kill-job"],
)
async def test_a_lost_answer_is_asked_again_never_done_again(
    time_env: WorkflowEnvironment,
    fleet: SimFleet,
    fault: str,
    actions: tuple[Action, ...],
    lost: list[str],
) -> None:
    """Every disruptive rung's first answer is lost after its effect landed: the activity is
    retried with the same key, which finds the effect recorded and answers the first result."""
    finding = fleet.inject(NODE, fault, gpu=1)
    for action in lost:
        fleet.lose_answers(action)
    ran = await remediate(time_env, fleet, finding, ladder_of(*actions, xids=[finding.xid or 0]))
    assert ran.result.outcome is Outcome.RECOVERED
    assert fleet.doubled() == []
    assert [a for n, a, _ in fleet.effects if n == NODE and a in lost] == lost  # once each
    assert all(fleet.lost_answers[a] == 0 for a in lost)  # the answers really were lost


async def test_a_lost_replacement_answer_replaces_once(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    finding = fleet.inject(NODE, "remap_failure", gpu=0)
    fleet.lose_answers("replace")
    ran = await remediate(
        time_env, fleet, finding, ladder_of(Action.DRAIN, Action.REPLACE, xids=[64])
    )
    assert ran.result.outcome is Outcome.REPLACED
    assert "already replaced" in ran.result.attempts[-1].detail  # asked again: it was done
    assert fleet.node(NODE).generation == 1 and fleet.doubled() == []


async def test_a_cluster_api_that_fails_for_a_while_is_ridden_out(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """Eight failures in a row of what the budget asks the cluster (five quick retries used to
    end the ladder FAILED with its node cordoned)."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    fleet.fail_next("pool_size", TransientError("503 from the API server"), times=8)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.RECOVERED
    assert fleet.failing["pool_size"][1] == 0


async def test_an_outage_longer_than_any_deadline_is_waited_out(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The cluster API the budget counts the pool with is down for half an hour: the ladder
    neither fails nor gives up — it waits for its lease, asks again, and goes on when the API
    is back."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    fleet.break_action("pool_size", TransientError("the API server is down"))
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        await wait_for_phase(time_env, handle, Phase.AWAITING_LEASE)
        await time_env.sleep(timedelta(minutes=30))  # past every step's deadline
        waiting = await state_of(handle)
        del fleet.broken["pool_size"]
        result = await handle.result()
    assert waiting.phase is Phase.AWAITING_LEASE and waiting.outcome is None
    assert result.outcome is Outcome.RECOVERED


async def test_a_refusal_for_good_ends_needs_human_with_the_node_held(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """The controller may not list the pool's nodes (RBAC): asking again cannot help. The
    ladder ends needs_human, the node held — never a failed workflow, never a cordon nobody
    owns, and nothing disruptive done."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    fleet.break_action(
        "pool_size", PermissionDenied("forbidden: remedy needs RBAC 'list' on nodes")
    )
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.outcome is Outcome.NEEDS_HUMAN  # not FAILED: the workflow owns the end
    assert "RBAC 'list' on nodes" in ran.result.detail
    assert fleet.node(NODE).unschedulable and REMEDY_CORDON in fleet.node(NODE).annotations
    assert [a for n, a in fleet.actions if n == NODE] == ["cordon"]  # nothing disruptive


async def test_a_report_after_its_ladder_or_a_later_one_finished_starts_nothing(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    runbook = shipped_runbooks.match(finding)
    async with running_workers(time_env.client, fleet) as queues:
        first = await report(time_env.client, queues, finding, runbook)
        assert (await first.result()).outcome is Outcome.RECOVERED
        before = list(fleet.actions)
        late = await report(time_env.client, queues, finding, runbook)  # a duplicate, late
        # A new fault: a new ladder (on another GPU: on the same one, so soon after its
        # recovery, it would be a recurrence and resume above the reset, tests/test_recurrence).
        fresh = fleet.inject(NODE, "ecc_dbe", gpu=3)
        second = await report(time_env.client, queues, fresh, runbook)
        assert (await second.result()).outcome is Outcome.RECOVERED
        older = await report(time_env.client, queues, finding, runbook)  # the first's, later
    assert late.run_id == first.result_run_id  # the finished ladder, not a new one
    assert second.result_run_id != first.result_run_id
    assert older.run_id == second.result_run_id  # the last ladder passed on what it knew
    assert fleet.actions[len(before) :] == [
        (NODE, a) for a in ("cordon", "drain", "reset_gpu", "restore")
    ]


class DescribesSeen(Interceptor):
    """The client's own seam: the workflow ids it was asked to describe."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Describes(next, self.ids)


class _Describes(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, ids: list[str]) -> None:
        super().__init__(next)
        self._ids = ids

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        self._ids.append(input.id)
        return await super().describe_workflow(input)


async def test_a_report_starts_or_joins_a_ladder_in_one_call_and_reads_a_finished_one_first(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """A storm's reports are new ladders and reports joining running ones: one call each, no
    describe. Only a report after the node's last ladder finished reads that ladder (stale?)."""
    seen, config = DescribesSeen(), time_env.client.config()
    # After the environment's own: the one that lets time skip while a result is awaited.
    client = Client(**{**config, "interceptors": [*config["interceptors"], seen]})
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    runbook = shipped_runbooks.match(finding)
    async with running_workers(time_env.client, fleet) as queues:
        first = await report(client, queues, finding, runbook)
        again = await report(client, queues, finding, runbook)  # joins it, while it runs
        assert seen.ids == []
        assert (await first.result()).outcome is Outcome.RECOVERED
        late = await report(client, queues, finding, runbook)
    assert again.result_run_id == first.result_run_id
    assert seen.ids == [first.id]  # the finished ladder, read once: the late report is stale
    assert late.run_id == first.result_run_id


async def test_a_fault_gone_before_the_first_disruptive_rung_disrupts_nothing(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """No tolerance window: the ladder would drain on the report alone. The link retrained
    before it got there (a stale report); the confirming probe sees a healthy node."""
    finding = fleet.inject(NODE, "pcie_degraded", gpu=4)
    fleet.clear_faults(NODE)
    runbook = Runbook(
        name="pcie-now",
        match=[Match(checks=["pcie"])],
        ladder=[Rung(action=Action.DRAIN), Rung(action=Action.REBOOT)],
    )
    ran = await remediate(time_env, fleet, finding, runbook)
    assert ran.result.outcome is Outcome.CLEARED
    assert "gone before the first disruptive rung" in ran.result.detail
    assert [a for n, a in fleet.actions if n == NODE] == ["cordon", "restore"]


async def test_a_waiting_ladder_asks_again_when_its_budget_was_lost(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """The pool's budget is terminated while a ladder waits for its lease: the ladder asks
    again after a while, the new budget run grants it, and the ladder finishes."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=1)
    holder = fleet.inject("gpu-node-001", "ecc_dbe", gpu=1)
    runbook = ladder_of(Action.DRAIN, Action.RESET_GPU, xids=[48], approve_last=True)
    async with running_workers(
        time_env.client, fleet, policy=BudgetPolicy(max_disruption="1", storm_share=1.0)
    ) as queues:
        first = await report(time_env.client, queues, holder, runbook)
        await wait_for_phase(time_env, first, Phase.AWAITING_APPROVAL)  # holds the one lease
        waiter = await report(time_env.client, queues, finding, runbook)
        await wait_for_phase(time_env, waiter, Phase.AWAITING_LEASE)
        # The budget is terminated with the waiter's request in it, then the holder finishes
        # (its release reaches nobody): only asking again gets the waiter its lease.
        budget = time_env.client.get_workflow_handle(budget_workflow_id(queues.pool))
        lost_run = (await budget.describe()).run_id
        await budget.terminate("lost")
        await APPROVE.send(first, ApproveRequest(by="test"))
        assert (await first.result()).outcome is Outcome.RECOVERED
        await APPROVE.send(waiter, ApproveRequest(by="test", rung_number=2, ahead=True))  # ahead
        result = await waiter.result()
        state = await state_of(waiter)
        new_run = (await budget.describe()).run_id
    assert result.outcome is Outcome.RECOVERED
    assert state.lease_granted_at is not None and new_run != lost_run
    assert state.lease_granted_at - state.lease_requested_at >= timedelta(minutes=5)


async def test_an_orphaned_cordon_is_looked_at_again_and_given_back(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """remedy's cordon, its ladder gone (terminated before it restored): the ladder the fleet
    scan starts for it re-probes and gives a healthy node back."""
    fleet.node(NODE).unschedulable = True
    fleet.node(NODE).annotations[REMEDY_CORDON] = "node-remediation/gpu-node-000: terminated"
    finding = orphaned_cordon(NODE, fleet.clock())
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "orphaned-cordon"
    ran = await remediate(time_env, fleet, finding, runbook)
    assert ran.result.outcome is Outcome.CLEARED
    assert not fleet.node(NODE).unschedulable
    assert [a for n, a in fleet.actions if n == NODE] == ["restore"]
