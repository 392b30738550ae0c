"""One rung numbering, from 1, for people and on the wire: rungs count from 1 wherever a person
reads or types one (the Web UI's details, `remedy show`, `approve`, `explain`, `rehearse`,
refusals, timers) and in what a caller sends and gets back (``ApproveRequest.rung_number``,
``ApproveResult.rung_number``, a signed decision's ``rung_number``).

The state keeps the ladder's index into the current runbook (``RemediationState.rung``,
``Attempt.rung``, ``Approval.rung``), from 0: running workflows depend on it. The old wire form,
``ApproveRequest.rung`` (an index, from 0), is still read for clients of the release before;
it approves only the rung waiting now (``legacy_refusal``).

A ladder that changes runbooks (an escalation, the next part's fault) keeps one numbering: the
new runbook's rungs are numbered on from the rung the ladder stood at when it switched, so no
number names two rungs of one ladder (``first_number``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Switch(Protocol):
    """What the numbering needs of a runbook change (remedy.ladder.remediation.Escalation)."""

    @property
    def from_rung(self) -> int: ...


def first_number(switches: Sequence[Switch], epoch: int) -> int:
    """How many numbers the runbooks before ``epoch`` took: each, up to and with the rung it
    stood at when the ladder switched (run or not, approved ahead or not)."""
    return sum(s.from_rung + 1 for s in switches[:epoch])


def rung_number(index: int, switches: Sequence[Switch] = (), epoch: int = 0) -> int:
    """The number people see for the rung at ``index`` of runbook ``epoch``: in a ladder that
    never switched, index 0 is "rung 1"."""
    return first_number(switches, epoch) + index + 1


def rung_index(number: int, switches: Sequence[Switch] = (), epoch: int = 0) -> int:
    """The index in runbook ``epoch`` of the rung people call ``number`` (negative: a rung of
    a runbook before it)."""
    return number - 1 - first_number(switches, epoch)


def rung_label(index: int, switches: Sequence[Switch] = (), epoch: int = 0) -> str:
    """A table cell: the rung's number, or "-" for steps outside the ladder (cordon,
    restore: index -1)."""
    return "-" if index < 0 else str(rung_number(index, switches, epoch))
