"""Runbooks: the operator-authored policy. Schema, all-or-nothing loader and matcher."""

from remedy.runbook.authored import Approval, Cause, RetryPolicy
from remedy.runbook.loader import RunbookError, RunbookProblem, load_runbooks
from remedy.runbook.matcher import DEFAULT_RUNBOOK, RunbookSet
from remedy.runbook.schema import Match, Runbook, Rung

__all__ = [
    "DEFAULT_RUNBOOK",
    "Approval",
    "Cause",
    "Match",
    "RetryPolicy",
    "Rung",
    "Runbook",
    "RunbookError",
    "RunbookProblem",
    "RunbookSet",
    "load_runbooks",
]
