"""What the fabric parsers share: the error an unreadable output raises, and the line prefixes
that launchers add (``mpirun --tag-output`` writes ``[1,0]<stdout>:`` before each line)."""

from __future__ import annotations

import re

_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")


class Unreadable(ValueError):
    """The output is not what the tool prints when it ran to the end: a failed test."""


def lines_of(text: str) -> list[str]:
    """The output's lines without launcher tags, stripped of indentation."""
    return [_TAG.sub("", line).strip() for line in text.splitlines()]


def number(token: str, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise Unreadable(f"{what}: {token!r} is not a number") from None
