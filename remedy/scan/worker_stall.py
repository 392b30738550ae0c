"""A worker that has stopped taking its tasks, judged from its task queue as the server sees it.

The controller's SDK worker can stop polling for good under a burst of new ladders with more
workflow-task slots than the default (docs/benchmarks.md, "Leases"): the process alive and idle,
nothing logged, the queue's backlog growing, no poller listed. Nothing inside the SDK says so. A
worker that cannot see its own failure is judged from outside it: tasks wait on the queue, the
oldest for longer than ``after``, and this worker has not polled for as long. A live worker with
work waiting polls again as soon as a slot frees (a slot is held for seconds: a workflow task
times out in 10), so both together mean nothing moves, not a busy controller.

The poll time is the server's; it is only compared for change, and how long it stayed the
same is measured on the watcher's own monotonic clock, so a clock that is off cannot make a
live worker look stalled (as the fleet scan judges an agent's heartbeat, remedy.scan.liveness)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

STALL_AFTER = timedelta(minutes=5)
LOOK_EVERY = timedelta(seconds=30)
# A live worker's slot can be held for tens of seconds (a local activity waits up to 30 s for
# a budget's answer): a shorter watch would restart a controller that is only busy.
MIN_STALL_AFTER = timedelta(minutes=1)


class QueueLook(NamedTuple):
    """One look at a task queue: the workflow tasks waiting, how long the oldest has waited,
    and the last time this worker polled it (None: not among the queue's pollers)."""

    waiting: int
    oldest: timedelta
    last_poll: datetime | None


class StallJudge:
    """Looks at one worker's queue, one after another; says when it has stalled."""

    def __init__(self, started: float, after: timedelta = STALL_AFTER) -> None:
        self._after = after
        self._poll: datetime | None = None
        self._poll_seen_at = started  # no poll seen yet: its silence counts from the start

    def judge(self, look: QueueLook, now: float) -> str | None:
        """``now``: the watcher's monotonic clock, in seconds. The stall, in words, or None."""
        if look.last_poll is not None and look.last_poll != self._poll:
            self._poll, self._poll_seen_at = look.last_poll, now
        silent = timedelta(seconds=now - self._poll_seen_at)
        if look.waiting <= 0 or look.oldest < self._after or silent < self._after:
            return None
        unlisted = " (not among the queue's pollers)" if look.last_poll is None else ""
        return (
            f"{look.waiting} workflow task(s) waiting, the oldest for {_s(look.oldest)}, "
            f"and this worker has not polled for {_s(silent)}{unlisted}"
        )


def stall_after_problem(after: timedelta) -> str | None:
    """Why ``after`` cannot be the watch's window (None: it can; zero turns the watch off)."""
    if timedelta(0) < after < MIN_STALL_AFTER:
        return (
            f"{after.total_seconds():g}s is shorter than {_s(MIN_STALL_AFTER)}: a busy "
            "controller would be restarted; 0 turns the watch off"
        )
    return None


def _s(span: timedelta) -> str:
    return f"{span.total_seconds():.0f} s"
