"""A pool held by people: its disruption shares taken by ladders that hold a lease while they
wait for an approval, and by nodes left cordoned for a person. Nothing else in the pool is
repaired until someone answers, so the budget's details, `remedy status` and a metric say so,
naming the nodes, since when, and the commands that free each share.

Pure functions of the budget's state; the time comes in as an argument.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from remedy.core.durations import format_duration
from remedy.core.models import Scope
from remedy.disruption.budget import BudgetState

SHOWN = 10  # nodes named, each with its commands, before "and N more"


class PersonHold(BaseModel):
    """One share of the pool that only a person can free."""

    node: str
    since: datetime
    waits_for: str  # "approval for replace", or "left cordoned for a person"
    commands: list[str]  # each frees the share


def held_by_people(state: BudgetState) -> list[PersonHold]:
    """The shares people hold, the oldest first. A ladder waiting for an approval is freed by
    the approval, or by an abort that leaves the node out and a release of its hold; a node
    left for a person by the release of its hold (or by giving the node back)."""

    def release(node: str) -> str:
        return f"remedy release-hold {node} --pool {state.pool}"

    rows = [
        PersonHold(
            node=w.node,
            since=w.since,
            waits_for=w.what or "an approval",
            commands=[
                f"remedy approve {w.node}",
                f"remedy abort {w.node} --reason WHY && {release(w.node)}",
            ],
        )
        for w in state.waiting_for_human
        if w.since is not None
    ]
    rows += [
        PersonHold(
            node=h.node,
            since=h.since,
            waits_for="left cordoned for a person",
            commands=[release(h.node)],
        )
        for h in state.counted_holds
    ]
    return sorted(rows, key=lambda r: (r.since, r.node))


def seized(state: BudgetState) -> bool:
    """Every share is held by people while ladders wait behind them: in a pool of 17 at 20 %
    (4 shares), four ladders waiting for a replace approval and one more asking for a lease.
    Nothing moves until someone answers."""
    return 0 < state.allowed <= len(held_by_people(state)) and bool(state.waiting)


def headline(state: BudgetState) -> str:
    """``pool a is held by people: 4 of 4 shares wait for a person, 13 ladders wait behind
    them`` (seized), or ``pool a: 1 of 4 shares held by people``; empty when none is."""
    held = len(held_by_people(state))
    if not held:
        return ""
    if seized(state):
        behind = len(state.waiting)
        return (
            f"pool {state.pool} is held by people: {held} of {state.allowed} shares wait for "
            f"a person, {behind} ladder{'s wait' if behind != 1 else ' waits'} behind them"
        )
    return f"pool {state.pool}: {held} of {state.allowed} shares held by people"


def alert(state: BudgetState) -> str:
    """The headline, with ALERT when the pool is seized (the budget's details show it in
    bold above its holders, remedy/disruption/blocking.py)."""
    line = headline(state)
    return _alert(state, line) if line else ""


def status_lines(state: BudgetState, now: datetime) -> list[str]:
    """What `remedy status` prints for the pool: ALERT when it is seized."""
    line = alert(state)
    if not line:
        return []
    rows = held_by_people(state)
    out = [line]
    for row in rows[:SHOWN]:
        waited = format_duration(max(now - row.since, timedelta(0)))
        since = f"{row.since:%m-%d %H:%M:%S}"
        out.append(f"      {row.node}: {row.waits_for} since {since} ({waited})")
        out += [f"          {c}" for c in row.commands]
    if len(rows) > SHOWN:
        out.append(f"      and {len(rows) - SHOWN} more (remedy status --json)")
    return out


def _alert(state: BudgetState, line: str) -> str:
    return f"ALERT {line}" if seized(state) else line


def out_of_scheduling(state: BudgetState) -> list[str]:
    """The pool's nodes the budget knows are out of scheduling: lease holders, nodes held for
    a person (their share given back or not), and waiters under remedy's cordon — the
    unschedulable share a breaker limits. Four ladders waiting for replace approvals and
    thirteen cordoned nodes waiting for a lease: all seventeen."""
    leased = {lease.node for lease in state.holders if lease.scope is Scope.NODE}
    nodes = leased | {h.node for h in state.held}  # a GPU lease's node still schedules
    return sorted(nodes | {w.node for w in state.waiting if w.cordoned})
