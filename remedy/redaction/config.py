"""An operator's redaction patterns: a small YAML file given to the controller and the agent
(``--redact-patterns FILE``), added to the default rules or replacing some of them::

    disable: [email]          # default rules left out, by name
    patterns:                 # tried after the defaults; a default's name replaces it
      - name: customer-id     # the marker: [REDACTED:customer-id]
        pattern: 'CUST-[0-9]{8}'
      - name: db-url
        pattern: 'postgres://[^:/]+:(?P<secret>[^@/]+)@[a-z.]+'  # only the group is hidden
        keep: '@localhost$'   # a match that also matches this is left alone

Loaded all or nothing: each problem is one ``FILE:LINE: FIELD: problem`` line, a pattern RE2
refuses named with RE2's reason.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from remedy.core.yaml_source import YamlFileError, load_model
from remedy.redaction.rules import DEFAULT_RULES, Redactor, Rule

MAX_RULES = 64  # an operator's patterns: each is one more pass over every text

_DEFAULT_NAMES = {r.name for r in DEFAULT_RULES}


class RedactionError(ValueError):
    pass


class RedactionFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: bool = True  # false: only this file's patterns
    disable: list[str] = []
    patterns: list[Rule] = Field(default=[], max_length=MAX_RULES)

    @field_validator("disable")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        if unknown := sorted(set(names) - _DEFAULT_NAMES):
            known = ", ".join(sorted(_DEFAULT_NAMES))
            raise ValueError(f"no default rule {', '.join(unknown)} (they are: {known})")
        return names

    @field_validator("patterns")
    @classmethod
    def _unique(cls, patterns: list[Rule]) -> list[Rule]:
        names = [r.name for r in patterns]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"pattern names used twice: {', '.join(twice)}")
        return patterns

    def redactor(self) -> Redactor:
        mine = {r.name for r in self.patterns}
        kept = [
            r
            for r in (DEFAULT_RULES if self.defaults else ())
            if r.name not in self.disable and r.name not in mine
        ]
        return Redactor(rules=(*kept, *self.patterns))


def load_redactor(path: Path | None) -> Redactor:
    """The default rules with ``path``'s patterns (None: the defaults alone)."""
    if path is None:
        return Redactor()
    try:
        return load_model(path, RedactionFile).redactor()
    except YamlFileError as exc:
        raise RedactionError(str(exc)) from None
