"""What an operator types that a workflow records (``--note``, ``--reason``, a trigger's
reason): one line of at most MAX_OPERATOR_TEXT characters. remedy's commands redact it (the
default rules) before they send it. A workflow cannot redact what it is sent — the request's
payload is in the history as the client wrote it (an update's acceptance, a signal) — so where
the text enters a workflow (``OperatorText`` on the wire models) a text that still holds a
secret is refused, and a refused update leaves nothing in the history: a request from another
client (the `temporal` CLI, the Web UI) is held to the same rules."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator

from remedy.redaction.rules import Redactor

MAX_OPERATOR_TEXT = 500  # a sentence or two: a note, not a log
MAX_OPERATOR_NAME = 64  # a person's name, as the keyring's names are
MAX_CLIENT_IDENTITY = 256  # remedy-cli:USER@HOST, or another client's identity

_DEFAULT = Redactor()
_KIND = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")


# The bidi controls (embeddings, overrides, isolates, marks): one reorders what `remedy show`
# and the Web UI print after it, so a note could show a reason other than the one recorded.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _one_line(text: str) -> None:
    """ValueError for a text over the limit, or with a control character (a newline or an
    escape sequence would rewrite the lines `remedy show` prints) or a bidi control."""
    if len(text) > MAX_OPERATOR_TEXT:
        raise ValueError(f"{len(text)} characters, over the limit of {MAX_OPERATOR_TEXT}")
    if bad := next((c for c in text if unicodedata.category(c) == "Cc"), None):
        raise ValueError(f"control character {bad!r} at {text.index(bad)} (one line of text)")
    if bad := next((c for c in text if c in BIDI_CONTROLS), None):
        raise ValueError(f"bidi control U+{ord(bad):04X} at {text.index(bad)}")


def secret_kinds(text: str) -> list[str]:
    """The kinds of what the default rules would hide in ``text`` (none: it is clean)."""
    if (hidden := _DEFAULT.text(text)) == text:
        return []
    # Counted: a text that already holds a marker of the kind found again is no clean text.
    new = Counter(_KIND.findall(hidden)) - Counter(_KIND.findall(text))
    return sorted(new) or sorted(set(_KIND.findall(hidden)))


def operator_text(text: str) -> str:
    """``text`` redacted, as remedy's commands send it; ValueError naming the problem."""
    _one_line(text)
    return _DEFAULT.text(text)


def _clean(text: str) -> str:
    _one_line(text)
    if kinds := secret_kinds(text):
        raise ValueError(
            f"holds what looks like a secret ({', '.join(kinds)}): it would stay in the "
            "history; remove it (remedy's commands redact it)"
        )
    return text


def _said(text: str) -> str:
    if not text.strip():
        raise ValueError("empty: say why")
    return text


def _within(limit: int) -> Callable[[str], str]:
    def bounded(text: str) -> str:
        if len(text) > limit:
            raise ValueError(f"{len(text)} characters, over the limit of {limit}")
        return _clean(text)

    return bounded


OperatorText = Annotated[str, AfterValidator(_clean)]
# Who says they decided (``--by``) and the client identity they connected with: one line each,
# bounded, and never a secret (``remedy approve --by ghp_…`` would write the token to history).
OperatorName = Annotated[str, AfterValidator(_within(MAX_OPERATOR_NAME))]
ClientIdentity = Annotated[str, AfterValidator(_within(MAX_CLIENT_IDENTITY))]
OperatorReason = Annotated[str, AfterValidator(_clean), AfterValidator(_said)]  # required
