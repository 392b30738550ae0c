"""Delivering a budget's grants and leave to cordon: many client signals side by side
(remedy.disruption.budget_signals says why not one server-side signal each).

At least once, like every activity: a retried delivery signals again, which a ladder takes as
it takes a re-grant (a lease only widens; leave given twice cordons once). A holder that is no
longer running is reported, not retried: the budget frees its lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client

from contract import activities as act
from contract.defs import SignalDef
from contract.messages import CORDON_LEAVE, LEASE_GRANTED
from remedy.disruption.budget_signals import BudgetSignals, Undelivered
from remedy.disruption.quarantine import CordonLeave

# Signals in flight at once: enough to keep the server busy, few enough not to flood it.
SIDE_BY_SIDE = 64


class BudgetSignalActivities:
    def __init__(self, client: Client) -> None:
        self._client = client

    @act.DELIVER_BUDGET_SIGNALS.defn
    async def deliver_budget_signals(self, out: BudgetSignals) -> Undelivered:
        """Every signal of ``out``; a retry starts after the part a heartbeat recorded."""
        tokens = out.leave_tokens
        sends: list[tuple[str, SignalDef[Any], Any]] = [
            *((g.holder, LEASE_GRANTED, g.grant) for g in out.grants),
            *(
                (holder, CORDON_LEAVE, CordonLeave(pool=out.pool, token=tokens.get(holder, "")))
                for holder in out.leave
            ),
        ]
        granted = {g.holder for g in out.grants}
        done, gone = _resumed_from(activity.info().heartbeat_details)
        while done < len(sends):
            chunk = sends[done : done + SIDE_BY_SIDE]
            found = await asyncio.gather(*(self._send(*send) for send in chunk))
            gone += [
                h for (h, _, _), ok in zip(chunk, found, strict=True) if not ok and h in granted
            ]
            done += len(chunk)
            activity.heartbeat(done, gone)
        return Undelivered(gone=gone)

    async def _send(self, workflow_id: str, signal: SignalDef[Any], payload: Any) -> bool:
        return await signal.send_if_running(self._client.get_workflow_handle(workflow_id), payload)

    def all(self) -> list[Callable[..., Any]]:
        return [self.deliver_budget_signals]


def _resumed_from(details: Any) -> tuple[int, list[str]]:
    """Where a retried attempt starts: after what the last heartbeat said was sent."""
    if len(details) < 2:
        return 0, []
    return int(details[0]), [str(h) for h in details[1]]
