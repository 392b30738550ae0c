"""The budget's signals out (grants, re-grants, leave to cordon), started without the loop
waiting for them.

The sends of one task go out together and the loop goes straight back to the requests that
wait, rather than awaiting every send first (which held the requests that came in between);
a delivery that fails (the holder is gone) frees its lease, from the send's own task.
Continue-as-new waits for the sends in flight.

The sends of a turn are one activity (``deliver``: up to
``PER_DELIVERY`` signals each) instead of a signal from the workflow each, which the server
delivers one after another (remedy.disruption.budget_signals); a holder found gone is reported back
and
its lease freed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract.activities import DELIVER_BUDGET_SIGNALS
from workflows.common import PATIENT_RETRY

with workflow.unsafe.imports_passed_through():
    from remedy.disruption.budget import BudgetState, LeaseGrant, LeaseRequest
    from remedy.disruption.budget_gpus import granted_scope
    from remedy.disruption.budget_messages import CordonAsk
    from remedy.disruption.budget_signals import BudgetSignals, GrantTo

# The server fails a workflow task that leaves more than 2,000 signals to other workflows
# pending (limit.numPendingSignals.error): a pool granting more at once sends the rest as the
# first are delivered.
MAX_IN_FLIGHT = 1000
# Signals per delivery activity: a burst of 10,000 grants is 20 activities side by side, each
# input well under the server's payload limits.
PER_DELIVERY = 500


class Outbox:
    """Signals being sent, kept until delivered (a task nobody holds may be collected)."""

    def __init__(self) -> None:
        self._sending: set[asyncio.Task[None]] = set()

    async def send(self, sends: Iterable[Coroutine[Any, Any, None]]) -> None:
        """Start ``sends`` in this workflow task; the loop does not wait for them."""
        for send in sends:
            if len(self._sending) >= MAX_IN_FLIGHT:
                await workflow.wait_condition(lambda: len(self._sending) < MAX_IN_FLIGHT)
            task = asyncio.create_task(send)
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def deliver(self, out: BudgetSignals, gone: Callable[[list[str]], None]) -> None:
        """Start the activities that signal ``out`` (remedy.disruption.budget_signals),
        ``PER_DELIVERY``
        signals each; ``gone`` is told the holders of grants that were no longer running."""
        grants, leave = out.grants, out.leave
        batches = [
            *(
                BudgetSignals(pool=out.pool, grants=grants[i : i + PER_DELIVERY])
                for i in range(0, len(grants), PER_DELIVERY)
            ),
            *(
                BudgetSignals(
                    pool=out.pool,
                    leave=leave[i : i + PER_DELIVERY],
                    leave_tokens={
                        h: out.leave_tokens[h]
                        for h in leave[i : i + PER_DELIVERY]
                        if h in out.leave_tokens
                    },
                )
                for i in range(0, len(leave), PER_DELIVERY)
            ),
        ]
        await self.send(_delivered(batch, gone) for batch in batches)

    def idle(self) -> bool:
        return not self._sending


class TellsHolders:
    """The budget's side of the outbox: whom it grants and gives leave, told together."""

    _state: BudgetState
    _changed: bool
    _outbox: Outbox
    _answering: set[str]  # holders told by their update's answer (ask_lease): no signal
    _by_signal: set[str]  # holders that asked by signal too: maybe nobody reads that answer

    async def _send_out(
        self, grants: Sequence[LeaseRequest] = (), leave: Sequence[CordonAsk] = ()
    ) -> None:
        """Tell the holders granted and the ladders given leave, without waiting for it."""
        grants = [req for req in grants if not self._told_in_answer(req.holder)]
        self._by_signal.difference_update(req.holder for req in grants)
        if not (grants or leave):
            return
        pool = self._state.pool
        out = BudgetSignals(
            pool=pool,
            grants=[
                GrantTo(
                    holder=req.holder,
                    grant=LeaseGrant(
                        pool=pool,
                        scope=granted_scope(self._state, req.holder),
                        run=req.run,
                        token=req.token,
                    ),
                )
                for req in grants
            ],
            leave=[ask.holder for ask in leave],
            leave_tokens={ask.holder: ask.token for ask in leave if ask.token},
        )
        await self._outbox.deliver(out, self._gone)

    def _told_in_answer(self, holder: str) -> bool:
        """An update of the holder's in flight answers it: no signal. Unless it asked by signal
        too: that is what a request does when its update's call failed (a timeout on a loaded
        worker), and the update, still in the budget, answers nobody (a grant lost until the
        holder's re-ask, 5 minutes on)."""
        if holder not in self._answering:
            return False
        return holder not in self._by_signal

    def _gone(self, holders: list[str]) -> None:
        """Granted to workflows that were no longer running: their leases are free again."""
        self._state.holders = [h for h in self._state.holders if h.holder not in holders]
        self._changed = True


async def _delivered(out: BudgetSignals, gone: Callable[[list[str]], None]) -> None:
    signals = len(out.grants) + len(out.leave)
    try:
        undelivered = await DELIVER_BUDGET_SIGNALS.execute(
            out,
            start_to_close_timeout=timedelta(minutes=2),
            heartbeat_timeout=timedelta(seconds=30),
            retry_policy=PATIENT_RETRY,  # until the server takes them: the leases are counted
            summary=f"{len(out.grants)} grants, {len(out.leave)} leave to cordon",
        )
    except ActivityError as err:  # refused for good: the ladders ask again (their re-ask)
        workflow.logger.warning("pool %s: %d signals not delivered: %s", out.pool, signals, err)
        return
    if undelivered.gone:
        gone(undelivered.gone)
