"""A storm's reports to a pool's budget go together (activities/group_commit.py): the first
alone, by signal-with-start (it starts the budget), those that came meanwhile in one update,
``nodes_unhealthy``. The budget counts every one. A budget of the release before has no handler
for the update: it refuses it, and the reports go one by one as signals, none lost. On the dev
server (the time-skipping one sends reports as signals: tests/test_lease_answered.py)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.budget import REPORT_WAIT, BudgetActivities
from contract.defs import UpdateRejected
from contract.messages import NODE_UNHEALTHY, NODES_UNHEALTHY
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_task_queue, budget_workflow_id
from remedy.disruption.budget import BudgetPolicy, BudgetState, NodeUnhealthy, UnhealthyReport
from remedy.disruption.budget_signals import UnhealthyReports
from tests.conftest import own_fleet, running_workers
from tests.test_disruption_budget import budget_state
from tests.test_job_watch import eventually

FREE = BudgetPolicy(max_disruption="100%", storm_share=1.0)
AT_ONCE = 5  # reports that meet


def report(node: str, pool: str, queue: str) -> NodeUnhealthy:
    return NodeUnhealthy(node=node, pool=pool, task_queue=queue, at=datetime.now(UTC))


class SlowServer(BudgetActivities):
    """The budget's activities with a first send that lasts until ``asks`` reports are in line
    behind it (a loaded server), and a record of each send's size. Everything else, the
    grouping and the sends themselves, is the real code."""

    def __init__(self, client: Client, asks: int, report_wait: timedelta) -> None:
        super().__init__(client, lambda _: 8, FREE, report_wait=report_wait)
        self._asks, self._in_line, self.sends = asks, 0, list[int]()
        self._all_in = asyncio.Event()

    async def _size(self, pool: str) -> int:
        size = await super()._size(pool)
        self._in_line += 1  # its report joins the line as this returns, before the next turn
        if self._in_line == self._asks:
            asyncio.get_running_loop().call_soon(self._all_in.set)
        return size

    async def _report(self, to: tuple[str, str], reports: list[UnhealthyReport]) -> None:
        await self._all_in.wait()
        self.sends.append(len(reports))
        await super()._report(to, reports)


async def one_then_together(
    client: Client, pool: str, queue: str, report_wait: timedelta = REPORT_WAIT
) -> list[int]:
    """A report alone (it starts the budget), then ``AT_ONCE`` reports that meet; the sizes
    of the sends that carried those."""
    await SlowServer(client, 1, report_wait).ask_to_cordon(report("node-0", pool, queue))
    meet = SlowServer(client, AT_ONCE, report_wait)
    await asyncio.gather(
        *(meet.ask_to_cordon(report(f"node-{i}", pool, queue)) for i in range(1, 1 + AT_ONCE))
    )
    assert sum(meet.sends) == AT_ONCE and max(meet.sends) > 1, meet.sends  # some went together
    return meet.sends


async def calls(client: Client, pool: str) -> tuple[int, int]:
    """The budget's report signals and accepted updates of reports, from its history."""
    signals = updates = 0
    handle = client.get_workflow_handle(budget_workflow_id(pool))
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signals += e.workflow_execution_signaled_event_attributes.signal_name == (
                NODE_UNHEALTHY.name
            )
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = e.workflow_execution_update_accepted_event_attributes
            updates += accepted.accepted_request.input.name == NODES_UNHEALTHY.name
    return signals, updates


async def test_reports_that_meet_go_in_one_update_and_each_is_counted(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("together", 8)
    async with running_workers(client, fleet, policy=FREE) as queues:
        await one_then_together(client, queues.pool, queues.controller)
        state = await budget_state(client, queues.pool)
        budget = client.get_workflow_handle(budget_workflow_id(queues.pool))
        with pytest.raises(UpdateRejected) as refusal:
            await NODES_UNHEALTHY.execute(budget, UnhealthyReports(reports=[]))
        refused = str(refusal.value)
        signals, updates = await calls(client, queues.pool)
    assert sorted(state.unhealthy) == [f"node-{i}" for i in range(1 + AT_ONCE)]  # all counted
    assert "no reports" in refused  # an empty update: refused, nothing in the history
    # The first alone; the rest, in line behind a slow first send, in at most two sends, at
    # least one of them an update.
    assert updates >= 1 and signals + updates < 1 + AT_ONCE, (signals, updates)


@workflow.defn(name=DISRUPTION_BUDGET_WORKFLOW, sandboxed=False)
class BudgetFromBefore:
    """A pool's budget of a release before ``nodes_unhealthy``: reports by signal only."""

    def __init__(self) -> None:
        self.nodes: list[str] = []

    @NODE_UNHEALTHY.handler
    def node_unhealthy(self, report: UnhealthyReport) -> None:
        self.nodes.append(report.node)

    @workflow.query(name="counted")
    def counted(self) -> list[str]:
        return self.nodes

    @workflow.run
    async def run(self, state: BudgetState) -> None:
        await workflow.wait_condition(lambda: False)


async def test_a_budget_from_before_refuses_the_update_and_gets_each_report_by_signal(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    pool, queue = f"pool-{uuid.uuid4().hex[:8]}", f"before-{uuid.uuid4().hex[:8]}"
    handle = client.get_workflow_handle(budget_workflow_id(pool))
    async with Worker(client, task_queue=budget_task_queue(queue), workflows=[BudgetFromBefore]):
        try:
            await one_then_together(client, pool, queue)
            want = [f"node-{i}" for i in range(1 + AT_ONCE)]

            async def all_counted() -> bool:
                return sorted(await handle.query("counted", result_type=list[str])) == want

            await eventually(all_counted, within_s=30)
            signals, updates = await calls(client, pool)
        finally:
            await handle.terminate("test over")
    assert (signals, updates) == (1 + AT_ONCE, 0)  # each by signal; no update taken


async def test_reports_an_update_cannot_deliver_in_time_go_by_signal(
    dev_env: WorkflowEnvironment,
) -> None:
    """The budget's worker is not polling (stalled, say): its update would wait with the
    reports in the controller's memory. After ``report_wait`` they go as signals, which the
    server keeps until the budget runs again."""
    client = dev_env.client
    pool, queue = f"pool-{uuid.uuid4().hex[:8]}", f"nobody-{uuid.uuid4().hex[:8]}"
    handle = client.get_workflow_handle(budget_workflow_id(pool))
    try:
        await one_then_together(client, pool, queue, report_wait=timedelta(seconds=1))
        signals, updates = await calls(client, pool)
    finally:
        await handle.terminate("test over")
    assert (signals, updates) == (1 + AT_ONCE, 0)  # the update never taken; each signalled
