"""The budget's quarantine breaker, mixed into DisruptionBudget: trips when too much of the
pool is unhealthy within the window, closes by itself once the storm subsides (what it holds
does not count towards it; held cordons go slowly, remedy.disruption.slow_start) or by `remedy
resume-pool`, records an Event for each, and gives leave to cordon to the ladders that asked
(remedy.disruption.quarantine)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract.activities import ALERT
from workflows import metrics
from workflows.budget_outbox import TellsHolders

with workflow.unsafe.imports_passed_through():
    from remedy.disruption import slow_start
    from remedy.disruption.budget_messages import CordonAsk
    from remedy.disruption.quarantine import (
        Alert,
        breaker_tripped,
        over_alert,
        over_note,
        scope,
        trip_alert,
        trip_note,
    )


class BudgetBreaker(TellsHolders):
    _leave: list[CordonAsk]  # asks to tell they may cordon (a resume)
    _alert: Alert | None  # the breaker tripped or closed: an Event to record

    def _check_breaker(self) -> None:
        state = self._state
        now = workflow.now()
        state.forget_old_reports(now)
        out = bool(state.holders or state.held or state.waiting)
        tripped = breaker_tripped(state, out, reopens=True)  # it reopens by itself, slowly
        if tripped and state.tripped:  # the nodes unhealthy now, not at the trip
            state.breaker_note = trip_note(state, out, reopens=True)
        elif tripped and not state.tripped:
            state.tripped, state.tripped_at, state.accepted_out = True, now, []
            state.trips += 1
            state.breaker_note = trip_note(state, out, reopens=True)
            slow_start.end(state)
            self._alert = trip_alert(state) if state.asking else None  # one ask held: this one
            metrics.breaker_tripped(state.pool)
            workflow.logger.warning("%s: %s", scope(state.pool), state.breaker_note)
        elif state.tripped and not tripped:
            state.tripped, state.breaker_note = False, over_note(state, now, out, reopens=True)
            # said as the trip is (the demo's `warn` lines); held cordons go slowly
            workflow.logger.warning("%s: %s", scope(state.pool), state.breaker_note)
            slow_start.begin(state)
            if state.asking:  # the ladders it held cordon now
                self._alert = over_alert(state)
        slow_start.settle(state, now)

    async def _quarantine(self) -> None:
        """Record the breaker's Event, and give leave to cordon to the ladders that asked —
        all of them once it is closed (or an operator closed it)."""
        state = self._state
        alert, self._alert = self._alert, None
        if alert is not None and alert.node:
            try:
                await ALERT.execute(
                    alert,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_attempts=3),
                    summary=f"alert: {alert.reason}",
                )
            except ActivityError as err:  # the details and the metric still say it
                workflow.logger.warning("%s: no Event: %s", scope(state.pool), err)
        leave, self._leave = self._leave, []
        if not state.tripped:  # all of them, or as many as a slow start admits
            leave = [*leave, *slow_start.leave_now(state, workflow.now())]
        await self._send_out(leave=leave)
