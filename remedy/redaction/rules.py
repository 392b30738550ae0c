"""Redaction: secrets and personal data in text from pods and nodes (log tails, kernel lines,
diagnostic output) replaced by a marker that keeps the kind, ``[REDACTED:jwt]``, before the text
reaches a workflow history, which anyone with read access to the namespace can open.

Patterns are RE2 (``google-re2``): matching time is linear in the text whatever the pattern,
so an operator's pattern cannot hang an activity with catastrophic backtracking, and RE2 refuses
what would need backtracking (back-references, look-arounds) when the pattern is loaded.

A pattern with a group named ``secret`` (or ``secret_…``) replaces only that group, so the key
stays readable (``password=[REDACTED:secret]``); without one the whole match is replaced. Every
rule looks at the original text; where matches overlap, the first rule's kind names the union.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import re2
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_TEXT = 1024 * 1024  # characters redacted in one text; beyond is cut, never passed raw
MAX_PATTERN = 1024  # characters in one pattern
PROGRAM_MEMORY = 1 << 20  # bytes RE2 may use for one compiled pattern: bounds a pattern's size
SECRET = "secret"  # the group a pattern marks as the part to hide


_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _options() -> Any:
    options = re2.Options()
    options.max_mem = PROGRAM_MEMORY
    options.log_errors = False  # the error is raised, with the pattern, to whoever loads it
    return options


def compiled(pattern: str) -> Any:
    """The RE2 program, or ValueError naming what RE2 refused."""
    try:
        regex = re2.compile(pattern, _options())
    except re2.error as exc:
        said = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"invalid regular expression {pattern!r}: {said}") from None
    if regex.search("") is not None:
        raise ValueError(f"{pattern!r} matches the empty string")
    return regex


class Rule(BaseModel):
    """One kind of thing to hide: its name is the marker's kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN)
    # A match that also matches this is left alone (a known false positive, e.g. systemd's
    # ``user@1000.service`` is no e-mail address).
    keep: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN)

    @field_validator("pattern", "keep")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            compiled(pattern)
        return pattern

    @cached_property
    def regex(self) -> Any:
        return compiled(self.pattern)

    @cached_property
    def kept(self) -> Any:
        return compiled(self.keep) if self.keep else None

    @cached_property
    def secret_groups(self) -> list[int]:
        names = self.regex.groupindex
        return sorted(
            i for name, i in names.items() if name == SECRET or name.startswith("secret_")
        )

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where this rule hides something in ``text``."""
        out = []
        for found in self.regex.finditer(text):
            if self.kept is not None and self.kept.search(found.group(0)) is not None:
                continue
            groups = [g for g in self.secret_groups if found.start(g) >= 0] or [0]
            spans = [(found.start(g), found.end(g)) for g in groups]
            # What an earlier pass already hid stays as it is (``token=[REDACTED:jwt]``).
            out += [(a, b) for a, b in spans if b > a and not _MARKER.fullmatch(text, a, b)]
        return out


# A PEM private key: the whole block, or to the end of a text cut inside it, or the end of a
# block whose start was cut off (a log tail begins mid-key). A log writes each of its lines
# after a prefix: dmesg's "[ 12.345678] ", syslog's "Dec  1 03:00:00 host kernel: ", kmsg's
# "6,1234,5678,-;".
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY-----"
_LINE_PREFIX = r"(?:[^\n]*[ \t\]:;])?"
_PEM = (
    rf"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:{_PEM_END}|\z)"
    rf"|(?:{_LINE_PREFIX}[A-Za-z0-9+/=]{{16,}}\r?\n)+{_LINE_PREFIX}{_PEM_END}"
)

# Key names that hold a secret: ``password=…``, ``"api_key": "…"``, ``DB_TOKEN=…``.
_KEYS = (
    r"[A-Za-z0-9_.-]*(?i:password|passwd|passphrase|secret|token|api[_-]?key|apikey"
    r"|access[_-]?key|private[_-]?key|credentials?)"
)
# Base64 that holds a digit, "+", "/" or padding: "Basic dXNlcjpodW50ZXIy", not "Basic checks".
_BASIC = r"(?:[A-Za-z0-9+/]*[0-9+/][A-Za-z0-9+/]*={0,2}|[A-Za-z0-9+/]+={1,2})"
# A password-like flag's value, ``--password hunter2`` (``--password=…`` is the ``secret`` rule's).
_FLAG_KEYS = r"(?i:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key)"
# YAML's and INI's "token: …" (the keys beside passwords): "token: expired" is prose, so only a
# quoted value, or one of 16+ characters of a token's alphabet that holds a digit and a letter
# (the ``keep`` below leaves one without either alone: RE2 cannot say "and").
_COLON_KEYS = r"[A-Za-z0-9_.-]*(?i:token|secret|api[_-]?key|apikey|access[_-]?key)"
_COLON_PROSE = rf"^{_COLON_KEYS}\s*:[ \t]*(?:[^0-9\"']*|[^A-Za-z\"']*)$"
_DEFAULTS = [
    # "Authorization: Bearer …", "Basic …" after the header, and a bare "Bearer …".
    (
        "authorization",
        r"(?i)(?:\b(?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|digest|token)\s+)?"
        r"|\bbearer\s+)(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)",
        None,
    ),
    # A bare "Basic …" (curl -H 'Basic …', a proxy's log): only what looks like base64.
    ("basic-auth", rf"\b(?i:basic)\s+(?P<secret>{_BASIC})(?:[^A-Za-z0-9+/=]|\z)", r"\s\S{1,7}\W?$"),
    # Headers that carry a key: "X-Api-Key: …", "X-Auth-Token: …", "X-Vault-Token: …".
    (
        "api-key-header",
        r"(?i)\bx-[a-z0-9-]*(?:api-?key|token|secret|auth)[a-z0-9-]*\s*[:=]\s*"
        r"(?P<secret>[^\s,;\"']{4,})",
        None,
    ),
    # A URL's password, whatever the host: "postgres://app:pw@10.0.0.5/db", "redis://:pw@localhost".
    ("url-password", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@", None),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", None),
    ("private-key", _PEM, None),
    ("aws-access-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", None),
    (
        "aws-secret-key",
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})",
        None,
    ),
    # Azure: a storage account's or a Service Bus / Event Hubs key in a connection string
    # ("AccountKey=…;", "SharedAccessKey=…"), and a SAS token's signature ("…&sig=…").
    (
        "azure-key",
        r"(?i)\b[A-Za-z0-9_]*(?:account|sharedaccess)_?key\s*=\s*"
        r"(?P<secret>[A-Za-z0-9+/]{16,}={0,2})",
        None,
    ),
    ("azure-sas", r"(?i)(?:^|[?&;\s\"'])sig=(?P<secret>[A-Za-z0-9%+/_-]{16,}={0,2})", None),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})", None),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", None),
    ("gitlab-token", r"\bgl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,}", None),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{30,}", None),
    (
        "api-key",
        r"\b(?:sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{20,}|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|AIza[0-9A-Za-z_-]{35})",
        None,
    ),
    (
        "secret",
        rf"\b{_KEYS}\s*=\s*(?:\"(?P<secret>[^\"\n]+)\"|'(?P<secret_q>[^'\n]+)'"
        r"|(?P<secret_b>[^\s&;,'\"]+))"
        rf"|\"{_KEYS}\"\s*:\s*\"(?P<secret_j>(?:[^\"\\\n]|\\.)+)\""
        # YAML's and a config dump's "password: x" (passwords only: "token: expired" is prose)
        r"|\b[A-Za-z0-9_.-]*(?i:password|passwd|passphrase)\s*:[ \t]*(?P<secret_y>[^\s,;'\"]+)"
        rf"|\b{_COLON_KEYS}\s*:[ \t]*(?:\"(?P<secret_cq>[^\"\n]+)\"|'(?P<secret_cs>[^'\n]+)'"
        r"|(?P<secret_c>[A-Za-z0-9_.~+/=-]{16,}))"
        rf"|(?:^|\s)--?[A-Za-z0-9_.-]*{_FLAG_KEYS}[ \t]+(?P<secret_f>[^\s-][^\s]*)",
        _COLON_PROSE,
    ),
    (
        "email",
        r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b",
        r"\.(?:service|socket|target|mount|automount|slice|timer|scope|device|swap|path)$",
    ),
]
DEFAULT_RULES: tuple[Rule, ...] = tuple(
    Rule(name=name, pattern=pattern, keep=keep) for name, pattern, keep in _DEFAULTS
)


class Redactor(BaseModel):
    """Applies its rules to text; ``Redactor()`` has the defaults, ``Redactor(rules=[])``
    hides nothing. A model, so it travels in a worker's configuration as data."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[Rule, ...] = DEFAULT_RULES

    @model_validator(mode="after")
    def _unique(self) -> Redactor:
        names = [r.name for r in self.rules]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"rule names used twice: {', '.join(twice)}")
        return self

    @cached_property
    def _any(self) -> Any:
        """One pass that says which rules match at all: most text holds nothing to hide."""
        rules = re2.Set.SearchSet(_options())
        for rule in self.rules:
            rules.Add(rule.pattern)
        rules.Compile()
        return rules

    def text(self, text: str) -> str:
        if len(text) > MAX_TEXT:
            text = text[:MAX_TEXT] + f" [cut: {len(text) - MAX_TEXT} more characters]"
        return _replaced(text, self._spans(text), self.rules)

    def texts(self, texts: Sequence[str]) -> list[str]:
        """Each text on its own (see ``lines`` for the lines of one log)."""
        return [self.text(t) for t in texts]

    def lines(self, lines: Sequence[str]) -> list[str]:
        """The lines of one log, as many as given, each with what a rule hides in the lines
        together (joined by newlines) hidden: a key written over several lines (a PEM block in
        the kernel log, one line per printk) is hidden in every line it covers, where each line
        alone looks like nothing. Lines of more than MAX_TEXT characters together are taken in
        groups (a key cut between two is hidden by its start and by its end)."""
        out: list[str] = []
        group: list[str] = []
        size = 0
        for line in lines:
            if group and size + len(line) + 1 > MAX_TEXT:
                out += self._together(group)
                group, size = [], 0
            group.append(line)
            size += len(line) + 1
        return out + (self._together(group) if group else [])

    def _together(self, lines: list[str]) -> list[str]:
        if len(lines) == 1:
            return [self.text(lines[0])]
        joined = "\n".join(lines)
        spans = _merged(self._spans(joined))
        out, start = [], 0
        for line in lines:
            end = start + len(line)
            # Each span, cut to this line: a line it covers whole becomes its marker.
            mine = [(max(a, start) - start, min(b, end) - start, r) for a, b, r in spans]
            out.append(_replaced(line, [(a, b, r) for a, b, r in mine if a < b], self.rules))
            start = end + 1
        return out

    def _spans(self, text: str) -> list[tuple[int, int, int]]:
        """What the rules hide in ``text``: start, end and the rule's place."""
        if not text or not self.rules:
            return []
        hits = self._any.Match(text)
        return [(*span, i) for i in sorted(hits or ()) for span in self.rules[i].spans(text)]


def _merged(spans: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Each union of overlapping spans, named by the first rule (in the rules' order) among
    them."""
    merged: list[list[int]] = []  # start, end, rule
    for start, end, rule in sorted(spans):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1], last[2] = max(last[1], end), min(last[2], rule)
        else:
            merged.append([start, end, rule])
    return [(start, end, rule) for start, end, rule in merged]


def _replaced(text: str, spans: list[tuple[int, int, int]], rules: Sequence[Rule]) -> str:
    """``text`` with each union of overlapping spans replaced by its rule's marker."""
    if not spans:
        return text
    out, at = [], 0
    for start, end, rule in _merged(spans):
        out += [text[at:start], marker(rules[rule].name)]
        at = end
    out.append(text[at:])
    return "".join(out)
