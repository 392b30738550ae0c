"""One rung numbering for people: rungs count from 1 wherever a person reads or types one (the
Web UI's details, `remedy show`, `approve`'s answer and its ``--rung``, `explain`,
`rehearse`, refusals). The state and the wire (``ApproveRequest.rung``, ``Attempt.rung``, a
signed decision) keep the ladder's index, from 0: running workflows and signatures depend on
it. Convert only here, at the human edge."""

from __future__ import annotations


def rung_number(index: int) -> int:
    """The number people see for the rung at ``index``: index 0 is "rung 1"."""
    return index + 1


def rung_index(number: int) -> int:
    """The ladder's index of the rung people call ``number``: "rung 1" is index 0."""
    return number - 1


def rung_label(index: int) -> str:
    """A table cell: the rung's number, or "-" for steps outside the ladder (cordon,
    restore: index -1)."""
    return "-" if index < 0 else str(rung_number(index))
