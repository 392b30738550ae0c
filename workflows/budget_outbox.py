"""The budget's signals out (grants, re-grants, leave to cordon), started without the loop
waiting for them.

Until this release the loop awaited every signal it decided to send before it looked at the
next batch of requests: a grant cost the budget two workflow tasks (one sends, one sees every
send delivered), and requests that came in between waited for the second. Measured at 100
failing nodes (bench/budget_bench.py, a busy 2-core machine): 166 budget workflow tasks for
100 leases, lease wait p50 22 s. Now the sends of one task go out together and the loop goes
straight back to the requests that wait; a delivery that fails (the holder is gone) frees its
lease as before, from the send's own task. Continue-as-new waits for the sends in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any

from temporalio import workflow

# workflow.patched: runs before awaited each batch of sends before granting the next.
SENDS_WITHOUT_WAITING = "budget-sends-without-waiting"
# The server fails a workflow task that leaves more than 2,000 signals to other workflows
# pending (limit.numPendingSignals.error): a pool granting more at once sends the rest as the
# first are delivered.
MAX_IN_FLIGHT = 1000


class Outbox:
    """Signals being sent, kept until delivered (a task nobody holds may be collected)."""

    def __init__(self) -> None:
        self._sending: set[asyncio.Task[None]] = set()

    async def send(self, sends: Iterable[Coroutine[Any, Any, None]]) -> None:
        """Start ``sends`` in this workflow task; the loop waits for them only in a run
        from before ``SENDS_WITHOUT_WAITING`` (asked only when there is something to send,
        where the command sequence differs)."""
        pending = list(sends)
        if not pending:
            return
        if not workflow.patched(SENDS_WITHOUT_WAITING):
            await asyncio.gather(*pending)
            return
        for send in pending:
            if len(self._sending) >= MAX_IN_FLIGHT:
                await workflow.wait_condition(lambda: len(self._sending) < MAX_IN_FLIGHT)
            task = asyncio.create_task(send)
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def idle(self) -> bool:
        return not self._sending
