"""Who blocks whom in a pool: every share's holder (node, phase when known, since, what it waits
for, the commands that free it) and the ladders waiting behind them, oldest first with their
place in line. The budget's Web UI details and `remedy status --blocking` both read it, so an
operator sees the same answer in either.

Pure functions of the budget's state; the time and the ladders' phases come in as arguments.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from remedy.core.durations import format_duration
from remedy.core.models import Scope
from remedy.disruption import held_by_people as people
from remedy.disruption import slow_start
from remedy.disruption.budget import BudgetState

SHOWN = 10  # holders, and waiters, named before "and N more"
TRIPPED = "TRIPPED"


class Holder(BaseModel):
    """One share of the pool, and what would free it."""

    node: str
    holds: str  # "a lease", "a GPU lease (GPUs 0, 3)", "a hold (left cordoned)"
    since: datetime
    waits_for: str  # "approval for replace", "a person", "its ladder (draining)"
    commands: list[str]
    phase: str = ""  # the ladder's phase, when the caller knows it
    by_people: bool = False  # only a person can free it


class Waiter(BaseModel):
    """A ladder waiting for a lease: its place in line (1 is served next)."""

    position: int
    node: str
    cordoned: bool  # out of scheduling while it waits
    gpus: list[int] = []  # a GPU-scoped request's GPUs (empty: the whole node)
    since: datetime | None = None  # when it began waiting, when the caller knows it


class Blocking(BaseModel):
    pool: str
    allowed: int
    holders: list[Holder]
    waiters: list[Waiter]
    breaker: str  # "ok" or "TRIPPED since ...: why; resume with ..."
    seized: bool  # every share held by people, ladders waiting behind them
    # Holders and waiters left out of the lists (a summary of the first ones: the details).
    more_holders: int = 0
    more_waiters: int = 0

    @property
    def holding(self) -> int:
        return len(self.holders) + self.more_holders

    @property
    def in_line(self) -> int:
        return len(self.waiters) + self.more_waiters


def who_blocks(
    state: BudgetState,
    phases: dict[str, str] | None = None,
    waiting_since: dict[str, datetime] | None = None,
    first: int | None = None,
) -> Blocking:
    """The pool's holders (people's shares first, then working ladders, oldest first in each)
    and its waiters in the order the budget serves them. ``phases``: node → its ladder's phase;
    ``waiting_since``: node → since when it waits (both from visibility; the budget keeps
    neither). ``first``: only so many of each, the rest counted (the budget's details, every
    workflow task of a pool of thousands: its cost was every holder's, replays included)."""
    phases = phases or {}
    by_people = people.held_by_people(state)
    waiting = {h.node for h in by_people}
    leased = _leased(state)
    holders = [
        Holder(
            node=h.node,
            holds="a lease" if h.node in leased else "a hold (left cordoned)",
            since=h.since,
            waits_for=h.waits_for,
            commands=h.commands,
            phase=phases.get(h.node, ""),
            by_people=True,
        )
        for h in by_people
    ]
    working = sorted(
        (lease for lease in state.holders if lease.node not in waiting),
        key=lambda le: (le.granted_at, le.node),
    )
    room = None if first is None else max(first - len(holders), 0)
    holders += [
        Holder(
            node=lease.node,
            holds=_holds(lease.scope, lease.gpus),
            since=lease.granted_at,
            waits_for=f"its ladder ({_words(phases.get(lease.node, '')) or 'working'})",
            commands=[f"remedy abort {lease.node} --reason WHY"],
            phase=phases.get(lease.node, ""),
        )
        for lease in working[:room]
    ]
    since = waiting_since or {}
    waiters = [
        Waiter(
            position=place,
            node=w.node,
            cordoned=w.cordoned,
            gpus=w.gpus if w.scope is Scope.GPU else [],
            since=since.get(w.node),
        )
        for place, w in enumerate(state.waiting[:first], start=1)
    ]
    return Blocking(
        pool=state.pool,
        allowed=state.allowed,
        holders=holders[:first],
        waiters=waiters,
        breaker=breaker(state),
        seized=people.seized(state),
        more_holders=len(by_people) + len(working) - len(holders[:first]),
        more_waiters=len(state.waiting) - len(waiters),
    )


def breaker(state: BudgetState) -> str:
    """``ok (2 unhealthy in the storm window)``, or tripped: since when (the node condition it
    set), why, the cordons it holds back, how to resume."""
    if not state.tripped:
        reopening = slow_start.note(state)  # after a trip: the held cordons go slowly
        return f"ok ({len(state.unhealthy)} unhealthy in the storm window" + (
            f"; {reopening})" if reopening else ")"
        )
    since = f" since {state.tripped_at:%Y-%m-%d %H:%M:%S} UTC" if state.tripped_at else ""
    asking = f"; {len(state.asking)} cordons held" if state.asking else ""
    return (
        f"{TRIPPED} (condition Quarantine=True{since}): {state.breaker_note}{asking}; "
        f"resume with `remedy resume-pool {state.pool}`"
    )


def markdown(blocking: Blocking) -> str:
    """The budget's details (Web UI): the breaker, then each holder and each waiter."""
    tripped = blocking.breaker.removeprefix(TRIPPED)
    shown = f"**BREAKER {TRIPPED}**{tripped}" if tripped != blocking.breaker else blocking.breaker
    out = [f"Breaker: {shown}", "", f"**Holders** ({blocking.holding}):"]
    for h in blocking.holders[:SHOWN]:
        commands = ", or ".join(f"`{c}`" for c in h.commands)
        out.append(
            f"- `{h.node}` holds {h.holds} since {h.since:%Y-%m-%d %H:%M:%S} UTC, waits for "
            f"{h.waits_for} — {commands}"
        )
    out += _more(blocking.holding, code=True)
    out += ["", f"**Waiting** ({blocking.in_line}, served in this order):"]
    out += [f"- {w.position}. `{w.node}`{_waiter_note(w)}" for w in blocking.waiters[:SHOWN]]
    return "\n".join(out + _more(blocking.in_line, code=True))


def lines(blocking: Blocking, now: datetime) -> list[str]:
    """What `remedy status --blocking` prints for the pool (``now``: the time of the read)."""
    out = [
        f"pool {blocking.pool}: {blocking.holding}/{blocking.allowed} shares held, "
        f"{blocking.in_line} waiting (read at {now:%Y-%m-%d %H:%M:%S} UTC)",
        f"  breaker: {blocking.breaker.replace('`', '')}",
    ]
    if blocking.seized:
        out.append("  ALERT people hold every share: nothing in the pool moves until they answer")
    out.append("  holders:" if blocking.holders else "  holders: none")
    for h in blocking.holders[:SHOWN]:
        held = format_duration(max(now - h.since, timedelta(0)))
        out.append(
            f"    {h.node}: {h.holds} since {h.since:%m-%d %H:%M:%S} ({held}), "
            f"waits for {h.waits_for}"
        )
        out += [f"        {c}" for c in h.commands]
    out += _more(blocking.holding, "    ")
    out.append("  waiting (served in this order):" if blocking.waiters else "  waiting: none")
    for w in blocking.waiters[:SHOWN]:
        waited = f" since {w.since:%m-%d %H:%M:%S}" if w.since else ""
        out.append(f"    {w.position}. {w.node}{waited}{_waiter_note(w)}")
    return out + _more(blocking.in_line, "    ")


def place_in_line(blocking: Blocking, node: str) -> str:
    """Where a waiting ladder stands, from the budget's one answer: ``waiting for a lease in
    pool a: place 2 of 3; held by gpu-0 (approval for replace since 12-02 00:10:05 UTC:
    `remedy approve gpu-0`), gpu-5 (its ladder (draining) since ...: `remedy abort ...`)``.
    Every holder is ahead of every waiter. Empty when the node is not in line (served, or its
    request not there yet)."""
    place = next((w.position for w in blocking.waiters if w.node == node), None)
    if place is None:
        return ""
    held = [
        f"{h.node} ({h.waits_for} since {h.since:%m-%d %H:%M:%S} UTC: `{h.commands[0]}`)"
        for h in blocking.holders[:SHOWN]
    ]
    more = blocking.holding - SHOWN
    line = (
        f"waiting for a lease in pool {blocking.pool}: place {place} of {blocking.in_line}; "
        + (f"held by {', '.join(held)}" if held else "no share held")
        + (f" and {more} more" if more > 0 else "")
    )
    if blocking.seized:
        line += "; people hold every share: nothing moves until they answer"
    if blocking.breaker.startswith(TRIPPED):
        line += f"; breaker {blocking.breaker}"
    return line


def _leased(state: BudgetState) -> set[str]:
    return {lease.node for lease in state.holders}


def _holds(scope: Scope, gpus: list[int]) -> str:
    if scope is Scope.GPU:
        return f"a GPU lease (GPUs {', '.join(map(str, gpus))})"
    return "a lease"


def _words(phase: str) -> str:
    return phase.replace("_", " ")


def _waiter_note(w: Waiter) -> str:
    notes = ["cordoned while it waits"] if w.cordoned else []
    if w.gpus:
        notes.append(f"GPUs {', '.join(map(str, w.gpus))}")
    return f" ({', '.join(notes)})" if notes else ""


def _more(count: int, indent: str = "- ", code: bool = False) -> list[str]:
    """``code``: the command as Markdown code, which the UI shows as typed (as prose, its
    ``--`` became en dashes)."""
    if count <= SHOWN:
        return []
    command = "`remedy status --blocking --json`" if code else "remedy status --blocking --json"
    return [f"{indent}and {count - SHOWN} more ({command})"]
