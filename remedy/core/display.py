"""Text from nodes and pods as remedy shows it to people (`remedy show`, `remedy status`, the Web
UI's details). Such text (a finding's evidence, a process name, a log line) is not the
operator's and may hold invisible characters: a bidi override (U+202E) reverses what is printed
after it, a zero-width one hides a difference, an escape sequence rewrites the terminal. Each is
written out as its code point where the text leaves for a screen; what is stored is left as it
came."""

from __future__ import annotations

import unicodedata

_KEPT = frozenset("\n\t")  # the layout of a multi-line detail


def _hidden(char: str) -> bool:
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and char not in _KEPT)


def visible(text: str) -> str:
    """``text`` with each format character (Unicode category Cf: bidi controls, zero-width
    characters) and each control character but newline and tab written as ``<U+202E>``."""
    if text.isascii() and text.isprintable():
        return text  # the common case, at no cost
    return "".join(f"<U+{ord(c):04X}>" if _hidden(c) else c for c in text)
