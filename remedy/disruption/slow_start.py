"""The breaker reopens by itself, slowly: a slow start per pool instead of a latch.

Once a tripped breaker closes by itself (the reports left the storm window, the nodes held for
people are few again), the cordons it held do not all go at once: it gives leave to one, and
one more for each admitted cordon that proves real — its ladder, past its tolerance window with
the fault confirmed, asks for a disruption lease. So 1, then 2, then 4 cordons, as TCP's slow
start grows its window, while a storm of false reports (a bad monitoring rollout) that clear
in their tolerance window keeps admitting one at a time. An admitted cordon that neither proves
real nor ends within the storm window frees its place without growing the window. The slow
start ends when no cordon waits and none admitted is unproven; while it runs the budget
publishes NEAR, so new ladders ask before they cordon and wait their turn behind the held ones.
An operator's `remedy resume-pool` ends it at once: every held cordon goes. The cluster's
breaker (``CLUSTER_POOL``) grants no leases, so it would never see a proof: it lets its held
cordons go at once, as before, and each pool's own breaker paces what is its.

Pure functions of the budget's state; the time comes in as an argument.
"""

from __future__ import annotations

from datetime import datetime

from remedy.disruption.budget import CLUSTER_POOL, BudgetState
from remedy.disruption.budget_messages import CordonAsk

FIRST = 1  # cordons admitted first after a trip


def begin(state: BudgetState) -> None:
    """The breaker closed by itself with cordons held: admit them slowly (a pool's)."""
    if state.asking and state.pool != CLUSTER_POOL:
        state.slow_start, state.admitted = FIRST, []


def end(state: BudgetState) -> None:
    state.slow_start, state.admitted = 0, []


def proven(state: BudgetState, holder: str) -> None:
    """The ladder asked for a lease: if its cordon was admitted in the slow start, it proved
    real, and one more cordon may go."""
    if any(a.holder == holder for a in state.admitted):
        state.admitted = [a for a in state.admitted if a.holder != holder]
        state.slow_start += 1


def gone(state: BudgetState, holder: str) -> None:
    """The ladder ended: its place is free, the window does not grow."""
    state.admitted = [a for a in state.admitted if a.holder != holder]


def leave_now(state: BudgetState, now: datetime) -> list[CordonAsk]:
    """The held asks that get leave now the breaker is closed: all of them without a slow
    start, else as many as the window has room for, oldest first."""
    if not state.slow_start:
        leave, state.asking = state.asking, []
        return leave
    room = max(state.slow_start - len(state.admitted), 0)
    leave, state.asking = state.asking[:room], state.asking[room:]
    state.admitted = [*state.admitted, *(a.model_copy(update={"renewed_at": now}) for a in leave)]
    return leave


def settle(state: BudgetState, now: datetime) -> None:
    """Admitted cordons unproven for a storm window free their place; the slow start ends
    once nothing waits and nothing admitted is unproven."""
    if not state.slow_start:
        return
    cutoff = now - state.policy.storm_window
    state.admitted = [a for a in state.admitted if a.renewed_at >= cutoff]
    if not state.asking and not state.admitted:
        end(state)


def note(state: BudgetState) -> str:
    """``reopening: 2 cordons at a time (1 admitted, 3 held)``; empty without a slow start."""
    if not state.slow_start:
        return ""
    # An admitted ladder may be asking again for a moment (its renewed ask crossed the leave):
    # held are the others.
    admitted = {a.holder for a in state.admitted}
    held = [a for a in state.asking if a.holder not in admitted]
    return (
        f"reopening: {state.slow_start} cordon{'s' if state.slow_start != 1 else ''} at a "
        f"time ({len(state.admitted)} admitted, {len(held)} held)"
    )
