"""Secrets and personal data hidden in text from pods and nodes before it reaches a workflow:
the rules and the redactor (rules.py), an operator's patterns file (config.py), and applying
it to a message's free-text fields (wire.py), and what an operator types (operator.py)."""

from remedy.redaction.config import RedactionError, load_redactor
from remedy.redaction.operator import (
    MAX_OPERATOR_TEXT,
    ClientIdentity,
    OperatorName,
    OperatorReason,
    OperatorText,
    operator_text,
    secret_kinds,
)
from remedy.redaction.rules import DEFAULT_RULES, Redactor, Rule, marker
from remedy.redaction.wire import redacted

__all__ = [
    "DEFAULT_RULES",
    "MAX_OPERATOR_TEXT",
    "ClientIdentity",
    "OperatorName",
    "OperatorReason",
    "OperatorText",
    "RedactionError",
    "Redactor",
    "Rule",
    "load_redactor",
    "marker",
    "operator_text",
    "redacted",
    "secret_kinds",
]
