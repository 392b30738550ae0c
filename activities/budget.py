"""Talking to a pool's DisruptionBudget from a NodeRemediation: a workflow can signal another
workflow but not start one, so lease requests and unhealthy reports go through signal-with-start
here. Also: which lease holders have closed (for reclaiming their leases)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.budget import BudgetPolicy, BudgetState, LeaseRequest, UnhealthyReport


class BudgetActivities:
    def __init__(
        self, client: Client, pool_size: Callable[[str], int], policy: BudgetPolicy
    ) -> None:
        self._client, self._pool_size, self._policy = client, pool_size, policy

    async def _size(self, pool: str) -> int:
        # The cluster client is synchronous: keep it off the worker's event loop.
        return await asyncio.to_thread(self._pool_size, pool)

    async def _signal(self, pool: str, task_queue: str, signal: str, arg: Any) -> None:
        await self._client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=pool, policy=self._policy),
            id=budget_workflow_id(pool),
            task_queue=task_queue,
            start_signal=signal,
            start_signal_args=[arg],
            static_summary=f"disruption budget of pool {pool}",
        )

    @activity.defn(name="request_lease")
    async def request_lease(self, req: LeaseRequest) -> None:
        full = req.model_copy(
            update={"pool_size": await self._size(req.pool), "policy": self._policy}
        )
        await self._signal(req.pool, req.task_queue, "request", full)

    @activity.defn(name="report_unhealthy")
    async def report_unhealthy(self, report: UnhealthyReport) -> None:
        full = report.model_copy(
            update={"pool_size": await self._size(report.pool), "policy": self._policy}
        )
        await self._signal(report.pool, report.task_queue, "node_unhealthy", full)

    @activity.defn(name="closed_workflows")
    async def closed_workflows(self, workflow_ids: list[str]) -> list[str]:
        closed = []
        for workflow_id in workflow_ids:
            try:
                status = (await self._client.get_workflow_handle(workflow_id).describe()).status
            except RPCError as err:
                if err.status is not RPCStatusCode.NOT_FOUND:
                    raise
                status = None
            if status is not WorkflowExecutionStatus.RUNNING:
                closed.append(workflow_id)
        return closed

    def all(self) -> list[Callable[..., Any]]:
        return [self.request_lease, self.report_unhealthy, self.closed_workflows]
