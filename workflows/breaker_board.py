"""The budget's side of the published breaker (remedy.disruption.quarantine.published_state): each
time
what it would publish changes, a controller activity writes it where a ladder's first cordon
and a node's agent read it (remedy.scan.cluster.BreakerBoard). A write that fails is tried again on
the budget's next round; a run started afresh publishes once, which also corrects a state a
terminated run left behind."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract.activities import PUBLISH_BREAKER

with workflow.unsafe.imports_passed_through():
    from remedy.disruption.budget import BudgetState
    from remedy.disruption.quarantine import BreakerNotice, BreakerState, published_state, scope

PUBLISH_CALL = timedelta(seconds=30)


class BreakerBoard:
    def __init__(self) -> None:
        self._published: BreakerState | None = None

    async def publish(self, state: BudgetState) -> None:
        """Once the breaker is judged and the leases granted (what an operator's resume waits
        for), before the Event and the leave: a ladder that reads it stale lets its cordon slip
        past a breaker about to trip, so it goes out as early as that allows."""
        out = bool(state.holders or state.held or state.waiting)
        now = published_state(state, out)
        if now is self._published:
            return
        try:
            await PUBLISH_BREAKER.execute(
                BreakerNotice(pool=state.pool, state=now),
                start_to_close_timeout=PUBLISH_CALL,
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"publish the breaker: {now.value}",
            )
        except ActivityError as err:  # cordons read the last state published; tried again
            workflow.logger.warning("%s: breaker not published: %s", scope(state.pool), err)
            return
        self._published = now
