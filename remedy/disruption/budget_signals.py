"""The budget's signals out, sent together by one activity instead of one server-side signal
each.

A workflow's signals to other workflows are delivered by the server one after another, each
recorded back in the sender's history, however many the budget decided in its one task. An
activity's client signals the ladders side by side, and the budget's history holds one activity
instead of two events per grant. What each way delivers: docs/benchmarks.md, "Figures behind
the code".
"""

from __future__ import annotations

from pydantic import BaseModel

from remedy.core.models import Scope
from remedy.disruption.budget import LeaseGrant, UnhealthyReport


class GrantTo(BaseModel):
    holder: str  # the workflow that asked: a ladder or an active check
    grant: LeaseGrant


class BudgetSignals(BaseModel):
    """What one turn of the budget's loop tells: grants (and re-grants), and leave to cordon."""

    pool: str
    grants: list[GrantTo] = []
    leave: list[str] = []  # ladders told they may cordon (the breaker let them)
    leave_tokens: dict[str, str] = {}  # each one's ask's token, carried back in its leave


class Undelivered(BaseModel):
    gone: list[str] = []  # holders of grants that are no longer running: their leases are free


class LeaseAnswer(BaseModel):
    """The budget's answer to a lease asked by an update: granted now (its ``scope``), or not
    yet (the grant comes later as a signal)."""

    granted: bool = False
    scope: Scope = Scope.NODE


class UnhealthyReports(BaseModel):
    """Reports to one budget sent together: the ladders' reports that came while the
    controller's last send to that budget was on the wire (activities/group_commit.py)."""

    reports: list[UnhealthyReport]


class ReportsTaken(BaseModel):
    reports: int = 0  # how many the budget counted
