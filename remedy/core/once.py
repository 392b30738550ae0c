"""Exactly once, on the world's side.

Temporal runs every activity at least once: a retry after a lost answer (the process died, the
server was away, the API dropped the reply) asks again for what may already be done. So each
disruptive action carries a key — the ladder and the rung — and is recorded where its effect
lands: on the node object for cluster actions, in the agent's durable state for host-local
ones. A repeat of a finished key changes nothing and answers what the first did. A repeat that
finds the action started but never answered is resolved by asking the world (a new boot id?
which of the pods it meant to evict are left?), never by doing it again blindly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from remedy.core.errors import ActionFailed

MAX_ENTRIES = 32  # a ledger keeps the latest; a key older than that is long answered


class Stage(StrEnum):
    STARTED = "started"  # recorded before the effect: its answer may still be lost
    DONE = "done"
    FAILED = "failed"  # the effect raised before it could land: a retry may run it again


class LedgerEntry(BaseModel):
    key: str
    action: str  # an Action's value (a str: a newer remedy's actions must not break the book)
    stage: Stage
    at: datetime
    detail: str = ""  # what was done (the first answer, repeated to any retry)
    boot_id: str = ""  # the boot the action was issued from (a reboot's proof)
    targets: list[str] = []  # what it set out to act on (pod uids): a retry acts on these only


class ActionLedger(Protocol):
    """Where a node's keyed actions are recorded (the node object, the agent's disk)."""

    def claim(self, entry: LedgerEntry) -> LedgerEntry | None:
        """Record ``entry`` if nothing is recorded under its key, and answer None; else change
        nothing and answer what is recorded. One step: two attempts cannot both claim."""

    def record(self, entry: LedgerEntry) -> None:
        """Replace the entry for its key; durable before it returns."""


def once(
    ledger: ActionLedger,
    key: str,
    action: str,
    clock: Callable[[], datetime],
    effect: Callable[[], str],
    unsure: Callable[[LedgerEntry], str],
    *,
    boot_id: str = "",
    targets: Sequence[str] = (),
    raised_means_failed: bool = False,
) -> str:
    """Run ``effect`` (it returns what it did, or raises) at most once for ``key``.

    A repeat of a finished key returns the first answer. A repeat of a key started and never
    answered calls ``unsure`` with what was recorded (its boot, its targets), which asks the
    world and acts only on what the first attempt meant to. When the effect raises, the key
    stays started (a retry is unsure: the effect may have landed before the error) — unless
    ``raised_means_failed``: a local command that failed did not do its work, and a retry may
    run it again. An empty key (a request from an older ladder) runs the effect unrecorded."""
    if not key:
        return effect()
    start = LedgerEntry(
        key=key,
        action=action,
        stage=Stage.STARTED,
        at=clock(),
        boot_id=boot_id,
        targets=list(targets),
    )
    prior = ledger.claim(start)
    if prior is not None and prior.stage is Stage.DONE:
        return prior.detail
    run: Callable[[], str] = effect
    if prior is not None and prior.stage is Stage.FAILED:
        ledger.record(start)  # the last attempt did nothing: this one takes the key again
    elif prior is not None:
        start, run = prior, partial(unsure, prior)  # never answered: ask, act on what it meant
    try:
        detail = run()
    except Exception:
        if raised_means_failed:
            ledger.record(start.model_copy(update={"stage": Stage.FAILED, "at": clock()}))
        raise
    ledger.record(start.model_copy(update={"stage": Stage.DONE, "at": clock(), "detail": detail}))
    return detail


def unsure_not_repeated(prior: LedgerEntry) -> str:
    """An action started and never answered that leaves no sign of having run (a GPU reset):
    it is not repeated; the rung's verification probe sees whether the fault is gone."""
    return f"{prior.action} was started and its answer lost; not repeated (verify)"


def reboot_once(
    ledger: ActionLedger,
    key: str,
    current_boot: str,
    clock: Callable[[], datetime],
    issue: Callable[[], str],
) -> str:
    """A reboot, issued at most once per key and proven by the boot id: the entry records the
    boot it was issued from, so a repeat from a new boot answers that the node rebooted, and
    one from the same boot that it was issued (the node has not gone down yet). A reboot
    command that failed records that, and a retry issues it again."""

    def unsure(prior: LedgerEntry) -> str:
        if prior.boot_id != current_boot:
            return f"rebooted ({prior.boot_id} → {current_boot})"
        return f"reboot issued from {current_boot}; not repeated: the node is going down"

    return once(
        ledger, key, "reboot", clock, issue, unsure, boot_id=current_boot, raised_means_failed=True
    )


# -- a ledger kept as a list of JSON objects (an annotation, a file) ------------------------
def find(book: list[Any], key: str) -> LedgerEntry | None:
    """The entry for ``key``. Entries are read one by one: one this remedy cannot read (from a
    newer version, or edited by hand) stays as it is and does not hide the others."""
    for raw in book:
        if isinstance(raw, dict) and raw.get("key") == key:
            try:
                return LedgerEntry.model_validate(raw)
            except ValidationError as exc:
                raise ActionFailed(f"cannot read what was recorded for {key}: {exc}") from exc
    return None


def with_entry(book: list[Any], entry: LedgerEntry) -> list[Any]:
    """``book`` with ``entry`` in place of any for its key, the newest ``MAX_ENTRIES``; every
    other entry kept verbatim."""
    rest = [r for r in book if not (isinstance(r, dict) and r.get("key") == entry.key)]
    return [*rest[-(MAX_ENTRIES - 1) :], entry.model_dump(mode="json")]
