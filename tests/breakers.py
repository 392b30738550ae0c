"""Waiting for a budget's published breaker (workflows/breaker_board.py) to catch up with the
budget: a ladder's first cordon reads the board, so a test that means "one node after the
other" lets the board say what the last one changed before the next one goes bad."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import budget_workflow_id
from remedy.disruption.quarantine import BreakerState, published_state
from workflows.disruption_budget import DisruptionBudget


async def published(
    env: WorkflowEnvironment, fleet: SimFleet, pool: str, counted: int
) -> BreakerState:
    """What the pool's budget published once it counted ``counted`` nodes and the board caught
    up with it, moving the server's clock a second per poll."""
    handle = env.client.get_workflow_handle_for(DisruptionBudget.run, budget_workflow_id(pool))
    for _ in range(60):
        budget = await handle.query(DisruptionBudget.state)
        sick = len(set(budget.unhealthy) | {a.node for a in budget.asking})
        out = bool(budget.holders or budget.held or budget.waiting)
        if sick >= counted and fleet.breakers.get(pool) is published_state(budget, out):
            return fleet.breakers[pool]
        await env.sleep(timedelta(seconds=1))
    raise AssertionError(f"pool {pool}: {counted} nodes never counted and published")
