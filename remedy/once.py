"""Exactly once, on the world's side.

Temporal runs every activity at least once: a retry after a lost answer (the process died, the
server was away, the API dropped the reply) asks again for what may already be done. So each
disruptive action carries a key — the ladder's run and the rung — and is recorded where its
effect lands: on the node object for cluster actions, in the agent's durable state for
host-local ones. A repeat of the same key changes nothing and answers what the first did. A
repeat that finds the action started but not answered is resolved by asking the world (a new
boot id? pods left to evict?), never by doing it again blindly.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel

from remedy.models import Action

MAX_ENTRIES = 32  # a ledger keeps the latest; a key older than that is long answered


class Step(StrEnum):
    STARTED = "started"  # recorded before the effect: the answer may still be lost
    DONE = "done"


class LedgerEntry(BaseModel):
    key: str
    action: Action
    step: Step
    at: datetime
    detail: str = ""  # what was done (the first answer, repeated to any retry)
    boot_id: str = ""  # the boot the action was issued from (a reboot's proof)


class ActionLedger(Protocol):
    """Where a node's keyed actions are recorded (the node object, the agent's state)."""

    def entry(self, key: str) -> LedgerEntry | None: ...

    def record(self, entry: LedgerEntry) -> None:
        """Add or replace the entry for its key; durable before it returns."""


def once(
    ledger: ActionLedger,
    key: str,
    action: Action,
    now: datetime,
    effect: Callable[[], str],
    unsure: Callable[[LedgerEntry], str],
    boot_id: str = "",
) -> str:
    """Run ``effect`` (it returns what it did, or raises) at most once for ``key``.

    A repeat of a finished key returns the first answer. A repeat of a key that was started
    but never answered calls ``unsure`` with what was recorded, which asks the world and says
    what it found (or resumes an effect that converges, such as a drain). An empty key (a
    request from an older ladder) runs the effect unrecorded, as before."""
    if not key:
        return effect()
    prior = ledger.entry(key)
    if prior is not None and prior.step is Step.DONE:
        return prior.detail
    if prior is None:
        ledger.record(
            LedgerEntry(key=key, action=action, step=Step.STARTED, at=now, boot_id=boot_id)
        )
        detail = effect()
    else:
        detail = unsure(prior)
        boot_id = prior.boot_id
    ledger.record(
        LedgerEntry(key=key, action=action, step=Step.DONE, at=now, detail=detail, boot_id=boot_id)
    )
    return detail


def kept(entries: list[LedgerEntry], entry: LedgerEntry) -> list[LedgerEntry]:
    """``entries`` with ``entry`` in place of any for its key, the newest ``MAX_ENTRIES``."""
    return [e for e in entries if e.key != entry.key][-(MAX_ENTRIES - 1) :] + [entry]


def unsure_not_repeated(prior: LedgerEntry) -> str:
    """An action started and never answered that leaves no sign of having run (a GPU reset):
    it is not repeated; the rung's verification probe sees whether the fault is gone."""
    return f"{prior.action.value} was started and its answer lost; not repeated (verify)"


def reboot_once(
    ledger: ActionLedger, key: str, current_boot: str, now: datetime, issue: Callable[[], str]
) -> str:
    """A reboot, issued at most once per key and proven by the boot id: the entry records the
    boot it was issued from, so a repeat from a new boot answers that the node rebooted, and
    one from the same boot that it was issued (the node has not gone down yet)."""

    def unsure(prior: LedgerEntry) -> str:
        if prior.boot_id != current_boot:
            return f"rebooted ({prior.boot_id} → {current_boot})"
        return f"reboot issued from {current_boot}; not repeated: the node is going down"

    return once(ledger, key, Action.REBOOT, now, issue, unsure, boot_id=current_boot)
