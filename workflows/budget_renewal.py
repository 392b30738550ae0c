"""When the pool's budget continues as new: once the server suggests it and a turn of the loop
found no message, or at the latest when its history reaches the server's warning.

A continue-as-new fails when a message reaches the run while the task that continues is being
worked on (the server will not close a run on messages it has not shown it: "UnhandledCommand"),
and the worker then replays the run's whole history before it can try again. A storm of
ladders that report, ask and release can pass the server's suggestion (4K events by default)
while it lasts, and a budget that continued then would fail, replay and grant nothing while its
ladders waited (the server's side of it: temporalio/temporal#1289, #8097; what it cost in a
benchmark: docs/benchmarks.md, "Figures behind the code").

The budget waits for a turn with no message: woken by its own clock
alone — the sweep's, or a wake-up ``QUIET`` after the first busy turn since the last such
wake-up. A storm's budget continues as new just after the storm, in a moment no ladder is
speaking. A pool that never falls quiet continues as new at ``MOST_EVENTS`` / ``MOST_BYTES``,
the server's default warnings, a fifth of its limits (51,200 events, 50 MB, where it terminates
the run).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from workflows.budget_sweep import Alarm

QUIET = timedelta(seconds=10)  # how long after a busy turn the loop looks again
RENEWAL = "continue as new when no message comes"  # its timer's summary
MOST_EVENTS = 10_240  # limit.historyCount.warn
MOST_BYTES = 10 * 1024 * 1024  # limit.historySize.warn


class Renewal:
    """``due()`` goes in the loop's wait condition; ``now()`` ends each turn of the loop."""

    def __init__(self) -> None:
        self._alarm = Alarm()

    def due(self) -> bool:
        return self._alarm.due()

    def now(self, messages: bool) -> bool:
        """Whether to continue as new at the end of this turn; ``messages``: one came in it."""
        info = workflow.info()
        self._alarm.ring()  # one that came due is spent: set afresh below, if still wanted
        if not info.is_continue_as_new_suggested():
            return False  # (the suggestion withdrawn: a server's limit raised while it ran)
        full = (
            info.get_current_history_length() >= MOST_EVENTS
            or info.get_current_history_size() >= MOST_BYTES
        )
        if full or not messages:
            return True
        self._alarm.set(workflow.now() + QUIET, RENEWAL)  # a pending one stays, if earlier
        return False
