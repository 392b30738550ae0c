"""What a decoder makes of one Xid message: the action remedy takes, and why, in one line."""

from __future__ import annotations

from dataclasses import dataclass

from remedy.xid.actions import XidAction


@dataclass(frozen=True, slots=True)
class Decoded:
    action: XidAction
    reason: str  # one line, naming what the driver said and whose rule decided


def first_line(text: str, limit: int = 120) -> str:
    """A fragment of a message fit to quote in a reason: one line, bounded."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
