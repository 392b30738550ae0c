"""ActiveChecks: one round of a pool's active checks, run by the pool's Temporal Schedule
(overlap: skip).

Reads the fleet, marks nodes it has never seen (their max age runs from then), picks the nodes
whose check is due (remedy/scan/active_checks.py), asks which are idle or held by a ladder or an
admission, and starts one ActiveCheck child per node to check: the idle ones, and the busy ones
past their max age, which take a disruption lease each. The round ends when its checks have;
its summary is its result and its details in the UI.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from contract import activities as act
from contract.messages import PAIR_READY
from contract.search_attributes import NODE, POOL
from workflows import metrics
from workflows.active_check import ActiveCheck
from workflows.fabric_pairs import PairRound

with workflow.unsafe.imports_passed_through():
    from contract.names import (
        ACTIVE_CHECKS_WORKFLOW,
        active_check_workflow_id,
        node_task_queue,
    )
    from remedy.core.models import NodeRef
    from remedy.scan.active_checks import (
        ActiveCheckPublish,
        ActiveChecksInput,
        CheckResult,
        NodeCheckInput,
        NodeCheckResult,
        RoundSummary,
        Workloads,
        due_nodes,
        plan_round,
        unseen,
    )
    from remedy.scan.fabric import PairReady
    from remedy.scan.fleet import NodeNames

RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_attempts=3)


@workflow.defn(name=ACTIVE_CHECKS_WORKFLOW)
class ActiveChecks:
    def __init__(self) -> None:
        self._pairs = PairRound()

    @PAIR_READY.handler
    def pair_ready(self, ready: PairReady) -> None:
        self._pairs.ready[ready.node] = ready.healthy

    @workflow.run
    async def run(self, inp: ActiveChecksInput) -> RoundSummary:
        fleet = await act.FLEET_NODES.execute(
            None,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="list the fleet's nodes",
        )
        nodes = [n for n in fleet.nodes if n.pool == inp.pool]
        await self._mark_all_seen(unseen(nodes), inp.pool)
        now = workflow.now()
        due = due_nodes(nodes, inp.policy, now)
        workloads = Workloads()
        if due:
            workloads = await act.NODE_WORKLOADS.execute(
                NodeNames(nodes=[d.name for d in due]),
                # Several API calls per node: a large pool takes a while, alive as it heartbeats.
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=RETRY,
                summary=f"which of {len(due)} due nodes are idle",
            )
        plan = plan_round(due, workloads, inp.policy.idle_cap(len(nodes)))
        summary = RoundSummary(pool=inp.pool, at=now, plan=plan)
        workflow.set_current_details(summary.markdown())
        checks = [(name, False) for name in plan.idle] + [(name, True) for name in plan.take_out]
        # Pair tests only between idle nodes, each held by its check (workflows/fabric_pairs.py).
        paired = plan.idle if inp.policy.fabric.pair_test and len(plan.idle) >= 2 else []
        tasks = {
            name: asyncio.ensure_future(self._check(inp, name, out, name in paired))
            for name, out in checks
        }
        if paired:
            summary.pairs = await self._pairs.run(inp.policy, paired, lambda n: tasks[n].done())
        summary.results = list(await asyncio.gather(*tasks.values()))
        checked = {
            r.node for r in summary.results if r.result in (CheckResult.PASSED, CheckResult.FAILED)
        }
        summary.overdue = sum(1 for d in due if d.stale and d.name not in checked)
        metrics.active_checks_overdue(inp.pool, summary.overdue)
        workflow.set_current_details(summary.markdown())
        return summary

    async def _mark_all_seen(self, nodes: list[str], pool: str) -> None:
        """A node whose mark failed is still unseen: the next round marks it again."""
        marks = await asyncio.gather(
            *(self._mark_seen(name, pool) for name in nodes), return_exceptions=True
        )
        for node, mark in zip(nodes, marks, strict=True):
            if isinstance(mark, ActivityError):
                workflow.logger.warning("could not mark %s first seen: %s", node, mark)
            elif isinstance(mark, BaseException):
                raise mark

    async def _mark_seen(self, node: str, pool: str) -> None:
        await act.PUBLISH_ACTIVE_CHECK.execute(
            ActiveCheckPublish(node=NodeRef(name=node, pool=pool)),
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RETRY,
            summary=f"first seen: {node}",
        )

    async def _check(
        self, inp: ActiveChecksInput, node: str, take_out: bool, paired: bool = False
    ) -> NodeCheckResult:
        ref = NodeRef(name=node, pool=inp.pool)
        try:
            return await workflow.execute_child_workflow(
                ActiveCheck.run,
                NodeCheckInput(
                    node=ref,
                    take_out=take_out,
                    paired=paired,
                    policy=inp.policy,
                    node_task_queue=inp.node_task_queue or node_task_queue(node),
                    node_pickup_timeout=inp.node_pickup_timeout,
                ),
                id=active_check_workflow_id(node),
                # A round cut short must not leave a node cordoned mid-check: the check goes on.
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"{node}: active check" + (" (taken out)" if take_out else ""),
                # `RemedyNode = '...'` lists a node's checks beside its ladders.
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(NODE, node), SearchAttributePair(POOL, inp.pool)]
                ),
            )
        except WorkflowAlreadyStartedError:
            detail = "a check of this node is still running"
        except ChildWorkflowError as err:
            detail = f"the check failed: {err.cause or err}"
        return NodeCheckResult(node=node, result=CheckResult.SKIPPED, detail=detail)
