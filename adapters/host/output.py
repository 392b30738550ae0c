"""What a host tool wrote, as remedy quotes it in an error or a result: its last characters,
redacted first (the default rules), since the quote reaches a workflow history — an activity
failure's message is no payload, and the codec never sees it unless it is encoded."""

from __future__ import annotations

from remedy.redaction import Redactor

_REDACTOR = Redactor()


def tool_output(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, stripped, after redaction (a cut first could
    leave the tail of a secret that no rule recognises any more)."""
    return _REDACTOR.text(text.strip())[-limit:]


def command_line(command: list[str]) -> str:
    """A command as an error quotes it, redacted: ``--password x`` among its arguments."""
    return _REDACTOR.text(" ".join(command))
