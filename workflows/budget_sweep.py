"""The pool budget's housekeeping — reclaim the leases of closed holders, give back nodes a
person restored — on a clock of its own.

The ``Alarm`` keeps one wake-up across the loop's turns, so the sweep runs on time however busy
the pool is: a wait for a signal *or* ``reclaim_every``, started afresh after every signal,
would never sweep a pool whose ladders signal more often than that (a waiting ladder asks again
every 5 minutes; a hundred of them ask every few seconds), and dead holders would keep their
leases, restored nodes stay held. Its timers are never cancelled (one that is no longer needed
fires into a loop that ignores it), which also keeps the time-skipping test server off a path
where it strands a workflow whose task cancels a timer that fired meanwhile ("invalid history
builder state for action", temporalio/sdk-java#3088).

A sweep that finds nothing doubles the wait for the next, up to
``MAX_DOUBLINGS``: a pool whose holders all wait for people (a night with nobody on call)
swept every ``reclaim_every`` and filled its history with a timer and an activity each time.
The wait is ``reclaim_every`` again as soon as who holds a share changes, a sweep finds
something, or a ladder waits for a share (then a dead holder or a restored node is what
keeps it waiting): a dead holder nobody waits behind is reclaimed within
``reclaim_every × 2^MAX_DOUBLINGS`` at worst.

The sweep backs off while ladders wait too, by one doubling at most (``WAITING_DOUBLINGS``):
a pool seized by holders that wait for people, its waiters asking again, would be swept
every ``reclaim_every`` for as long as the people took. (Local activities for the sweep's
checks would save more events still, at the cost of a second way to call an activity:
docs/benchmarks.md, "Figures behind the code".)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract.activities import CLOSED_WORKFLOWS, HELD_NODES

with workflow.unsafe.imports_passed_through():
    from remedy.disruption.budget import BudgetState
    from remedy.disruption.budget_messages import ASK_KEPT_FOR, HeldCheck, HolderCheck

SOONEST = timedelta(seconds=1)
MAX_DOUBLINGS = 3  # a quiet pool sweeps every 8 × reclaim_every (8 minutes by default)
WAITING_DOUBLINGS = 1  # with ladders waiting: every 2 × reclaim_every at most


def wake_at(
    state: BudgetState,
    swept_at: datetime,
    now: datetime,
    every: timedelta,
) -> datetime | None:
    """When the loop must wake by itself: the next sweep (``every`` after the last) while
    anyone holds a lease or a node is held, and when the oldest ask ages out, or, while the
    breaker is tripped, the oldest unhealthy report (it must close by itself once the storm
    passes; a closed one cannot trip on fewer reports, and every turn ages them out first).
    Never sooner than ``SOONEST`` from ``now``."""
    wakes = [swept_at + every] if state.holders or state.held else []
    if state.asking:  # an ask its ladder stopped renewing is dropped
        wakes.append(min(a.renewed_at for a in state.asking) + ASK_KEPT_FOR)
    if state.unhealthy and state.tripped:
        wakes.append(min(state.unhealthy.values()) + state.policy.storm_window)
    if (
        state.admitted
    ):  # a slow start's unproven cordon frees its place (remedy.disruption.slow_start)
        wakes.append(min(a.renewed_at for a in state.admitted) + state.policy.storm_window)
    return max(now + SOONEST, min(wakes)) if wakes else None


class Alarm:
    """One wake-up time, kept until it is due; an earlier one replaces it, a later one waits
    for it. ``due()`` goes in the loop's wait condition."""

    def __init__(self) -> None:
        self._at: datetime | None = None
        self._fired: datetime | None = None  # the latest wake-up whose timer fired
        self._timers: set[asyncio.Task[None]] = set()

    def set(self, at: datetime | None, summary: str) -> None:
        if at is None or (self._at is not None and self._at <= at):
            return
        self._at = at
        timer = asyncio.create_task(self._wake(at, summary))
        self._timers.add(timer)  # kept until it fires: a task nobody holds may be collected
        timer.add_done_callback(self._timers.discard)

    async def _wake(self, at: datetime, summary: str) -> None:
        await workflow.sleep(at - workflow.now(), summary=summary)
        self._fired = at if self._fired is None else max(self._fired, at)

    def due(self) -> bool:
        """Its time has come: by the clock, or its timer fired (the clock of the task that
        saw it may read a hair earlier than the time the timer was set for)."""
        if self._at is None:
            return False
        return workflow.now() >= self._at or (self._fired is not None and self._fired >= self._at)

    def ring(self) -> bool:
        """True once when the wake-up is due; the next one is set afresh."""
        if not self.due():
            return False
        self._at = None
        return True


def sweep_every(every: timedelta, quiet_sweeps: int, most: int = MAX_DOUBLINGS) -> timedelta:
    """The wait after ``quiet_sweeps`` sweeps in a row that found nothing, doubled ``most``
    times at most.

    >>> [sweep_every(timedelta(minutes=1), n).seconds // 60 for n in range(6)]
    [1, 2, 4, 8, 8, 8]
    >>> [sweep_every(timedelta(minutes=1), n, WAITING_DOUBLINGS).seconds // 60 for n in range(3)]
    [1, 2, 2]
    """
    doublings: int = 2 ** min(quiet_sweeps, most)
    return every * doublings


def _holding(state: BudgetState) -> frozenset[str]:
    """Who holds a share: the lease holders and the nodes held for a person."""
    return frozenset(h.holder for h in state.holders) | {f"held:{h.node}" for h in state.held}


class BudgetSweep:
    """Mixed into DisruptionBudget: the sweep's two steps, and how often it runs."""

    _state: BudgetState
    _changed: bool
    _quiet_sweeps = 0  # sweeps in a row that found nothing, for the same holders
    _swept_for: frozenset[str] = frozenset()  # who held a share at the last sweep
    _swept_at: datetime
    _holders_changed_at: datetime | None = None  # first seen to differ since that sweep

    def _wake_at(self) -> datetime | None:
        """When the loop wakes by itself next (``wake_at``)."""
        return wake_at(self._state, self._swept_at, workflow.now(), self._sweep_every())

    def _sweep_every(self) -> timedelta:
        """How long after the last sweep the next is due: ``reclaim_every``, doubled per
        quiet sweep, once at most while a ladder waits for a share (it is freed as soon as a
        sweep can free it). A new holder is checked ``reclaim_every`` after the holders
        changed, not at once: it just got its share."""
        state, every = self._state, self._state.policy.reclaim_every
        most = WAITING_DOUBLINGS if state.waiting else MAX_DOUBLINGS
        backed_off = sweep_every(every, self._quiet_sweeps, most)
        if _holding(state) == self._swept_for:
            return backed_off
        self._holders_changed_at = self._holders_changed_at or workflow.now()
        return min(backed_off, self._holders_changed_at + every - self._swept_at)

    async def _housekeep(self, sweep: Callable[[], Awaitable[None]]) -> None:
        """``sweep``, counting whether it was quiet: nothing reclaimed or given back, for the
        same holders as the sweep before."""
        before = _holding(self._state)
        await sweep()
        after = _holding(self._state)
        quiet = after == before == self._swept_for
        self._quiet_sweeps = self._quiet_sweeps + 1 if quiet else 0
        self._swept_for, self._holders_changed_at = after, None

    async def _end_holds(self) -> None:
        """A node held for a human is given back when remedy's cordon is gone from it (it was
        restored, or replaced by a node that never had it)."""
        state = self._state
        try:
            answer = await HELD_NODES.execute(
                HeldCheck(nodes=[h.node for h in state.held]),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"which of {len(state.held)} nodes held for a human are still cordoned",
            )
        except ActivityError as err:  # unsure: the holds stay (the cap errs on the safe side)
            workflow.logger.warning("pool %s: holds not checked: %s", state.pool, err)
            return
        still = set(answer.nodes)
        if any(h.node not in still for h in state.held):
            state.held = [h for h in state.held if h.node in still]
            self._changed = True

    async def _reclaim(self) -> None:
        """Free the leases of holders whose workflows closed without releasing them."""
        state = self._state
        answer = await CLOSED_WORKFLOWS.execute(
            HolderCheck(workflow_ids=[h.holder for h in state.holders]),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3),
            summary=f"which of {len(state.holders)} lease holders have closed",
        )
        closed = answer.workflow_ids
        if closed:
            state.reclaimed += len(closed)
            state.holders = [h for h in state.holders if h.holder not in closed]
            self._changed = True
