"""Talking to a pool's DisruptionBudget from a NodeRemediation: a workflow can signal another
workflow but not start one, so lease requests and unhealthy reports go through signal-with-start
here. Also: which lease holders have closed (for reclaiming their leases)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from contract import activities as act
from contract.messages import LEASE_REQUEST, NODE_UNHEALTHY
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_workflow_id
from remedy.budget import (
    BudgetPolicy,
    BudgetState,
    ClosedHolders,
    HolderCheck,
    LeaseRequest,
    LeaseWanted,
    NodeUnhealthy,
    UnhealthyReport,
)


class BudgetActivities:
    def __init__(
        self, client: Client, pool_size: Callable[[str], int], policy: BudgetPolicy
    ) -> None:
        self._client, self._pool_size, self._policy = client, pool_size, policy

    async def _size(self, pool: str) -> int:
        # The cluster client is synchronous: keep it off the worker's event loop.
        return await asyncio.to_thread(self._pool_size, pool)

    async def _signal(self, pool: str, task_queue: str, start: dict[str, Any]) -> None:
        """Signal-with-start of the pool's budget (``start``: the signal and its payload)."""
        await self._client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=pool, policy=self._policy),
            id=budget_workflow_id(pool),
            task_queue=task_queue,
            static_summary=f"disruption budget of pool {pool}",
            **start,
        )

    @act.REQUEST_LEASE.defn
    async def request_lease(self, wanted: LeaseWanted) -> None:
        size = await self._size(wanted.pool)
        full = LeaseRequest(**wanted.model_dump(), pool_size=size, policy=self._policy)
        await self._signal(wanted.pool, wanted.task_queue, LEASE_REQUEST.start_with(full))

    @act.REPORT_UNHEALTHY.defn
    async def report_unhealthy(self, report: NodeUnhealthy) -> None:
        size = await self._size(report.pool)
        full = UnhealthyReport(**report.model_dump(), pool_size=size, policy=self._policy)
        await self._signal(report.pool, report.task_queue, NODE_UNHEALTHY.start_with(full))

    @act.CLOSED_WORKFLOWS.defn
    async def closed_workflows(self, check: HolderCheck) -> ClosedHolders:
        closed = []
        for workflow_id in check.workflow_ids:
            try:
                status = (await self._client.get_workflow_handle(workflow_id).describe()).status
            except RPCError as err:
                if err.status is not RPCStatusCode.NOT_FOUND:
                    raise
                status = None
            if status is not WorkflowExecutionStatus.RUNNING:
                closed.append(workflow_id)
        return ClosedHolders(workflow_ids=closed)

    def all(self) -> list[Callable[..., Any]]:
        return [self.request_lease, self.report_unhealthy, self.closed_workflows]
