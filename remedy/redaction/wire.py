"""Redacting a message before it crosses into a workflow: every field marked ``FreeText``
(``remedy.core.models.Untrusted``), at any depth, through the message's own structure. A model that
gains a free-text field marks it there and every boundary hides its secrets; nothing here lists
fields."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from remedy.core.models import Untrusted
from remedy.redaction.rules import Redactor

M = TypeVar("M", bound=BaseModel)


def redacted(message: M, redactor: Redactor) -> M:
    """``message`` with its free text redacted; the same object when there was nothing to hide."""
    changes = {}
    for name, field in type(message).model_fields.items():
        value = getattr(message, name)
        if any(isinstance(m, Untrusted) for m in field.metadata):
            new = redactor.text(value) if isinstance(value, str) else value
        else:
            new = _within(value, redactor)
        if new is not value and new != value:
            changes[name] = new
    return message.model_copy(update=changes) if changes else message


def _within(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, BaseModel):
        return redacted(value, redactor)
    if isinstance(value, list | tuple):
        return type(value)(_within(v, redactor) for v in value)
    if isinstance(value, dict):
        return {k: _within(v, redactor) for k, v in value.items()}
    return value
