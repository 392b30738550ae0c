"""All-or-nothing runbook loading with errors that name file, line and field."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from remedy.core.yaml_source import YamlDocument, YamlSyntaxError, read_yaml
from remedy.redaction import secret_kinds
from remedy.runbook.authored import AUTHORING, RetryPolicy
from remedy.runbook.schema import Match, Runbook, Rung

RUNBOOK_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class RunbookProblem:
    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class RunbookError(Exception):
    """Raised with every problem found; when raised, nothing was loaded."""

    def __init__(self, problems: list[RunbookProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def runbook_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand folders to their YAML files, sorted, so load order never depends on the disk."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in RUNBOOK_SUFFIXES))
        else:
            files.append(path)
    return files


@dataclass(frozen=True)
class RunbookSource:
    """A loaded runbook with where it was written: its file and the line of each field."""

    runbook: Runbook
    file: str
    doc: YamlDocument

    def line_of(self, path: tuple[str | int, ...]) -> int:
        return self.doc.line_of(path)


def load_runbooks(paths: Iterable[str | Path]) -> list[Runbook]:
    """Load every runbook under ``paths``: all of them, or RunbookError listing every problem."""
    return [source.runbook for source in load_runbook_sources(paths)]


def load_runbook_sources(paths: Iterable[str | Path]) -> list[RunbookSource]:
    """``load_runbooks``, each runbook with its file and lines (what `validate` warns about
    names them)."""
    problems: list[RunbookProblem] = []
    loaded: list[RunbookSource] = []
    first_seen: dict[str, str] = {}
    files = runbook_files(paths)
    if not files:
        raise RunbookError(
            [RunbookProblem(str(p), 1, "-", "no runbook files found") for p in paths]
            or [RunbookProblem("-", 1, "-", "no paths given")]
        )
    for file in files:
        source, file_problems = _load_file(file)
        problems.extend(file_problems)
        if source is None:
            continue
        runbook = source.runbook
        if runbook.name in first_seen:
            problems.append(
                RunbookProblem(
                    str(file),
                    source.line_of(("name",)),
                    "name",
                    f"duplicate runbook name {runbook.name!r}, "
                    f"first defined in {first_seen[runbook.name]}",
                )
            )
            continue
        first_seen[runbook.name] = str(file)
        loaded.append(source)
    if problems:
        raise RunbookError(problems)
    return loaded


def _load_file(file: Path) -> tuple[RunbookSource | None, list[RunbookProblem]]:
    name = str(file)
    try:
        doc = read_yaml(file)
    except (OSError, UnicodeDecodeError) as exc:
        return None, [RunbookProblem(name, 1, "-", f"cannot read: {exc}")]
    except YamlSyntaxError as exc:
        return None, [RunbookProblem(name, exc.line, "-", str(exc))]
    problems = [
        RunbookProblem(name, line, _dotted(path), "duplicate key") for path, line in doc.duplicates
    ]
    if not isinstance(doc.data, dict):
        problems.append(
            RunbookProblem(
                name,
                doc.line_of(()),
                "-",
                "a runbook must be a mapping with name, match and ladder",
            )
        )
        return None, problems
    try:
        runbook = Runbook.model_validate(doc.data, extra="forbid", context=AUTHORING)
    except ValidationError as exc:
        problems.extend(_problems_from(name, doc, exc))
        return None, problems
    problems += _secrets_in(name, doc, runbook)
    if problems:
        return None, problems
    return RunbookSource(runbook, name, doc), []


# A runbook's free text: copied as written into every finding's ladder state (a workflow's
# history) and the Web UI, where no redaction runs. A field that gains free text joins here.
FREE_TEXT = ("description",)


def _secrets_in(file: str, doc: YamlDocument, runbook: Runbook) -> list[RunbookProblem]:
    """What the default redaction rules would hide in the runbook's free text, refused."""
    out = []
    for field in FREE_TEXT:
        if kinds := secret_kinds(getattr(runbook, field)):
            said = (
                f"holds what looks like a secret ({', '.join(kinds)}): it would be copied "
                "into every finding's ladder and the Web UI; remove it"
            )
            out.append(RunbookProblem(file, doc.line_of((field,)), field, said))
    return out


def _problems_from(file: str, doc: YamlDocument, exc: ValidationError) -> list[RunbookProblem]:
    out = []
    for error in exc.errors():
        ctx = error.get("ctx", {})
        # A runbook-wide problem that one rung makes (replace not last) points at that rung.
        loc = (*error["loc"], "ladder", ctx["rung"]) if "rung" in ctx else error["loc"]
        path = _data_path(doc, loc)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "required field is missing"
        elif error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "enum" and isinstance(error["input"], str):
            message += _did_you_mean(error["input"], re.findall(r"'([^']*)'", ctx["expected"]))
        out.append(RunbookProblem(file, doc.line_of(path), _dotted(path), message))
    return out


def _did_you_mean(word: str, choices: list[str]) -> str:
    """``; did you mean 'reset_gpu'?`` for a word close to one it could be (else nothing)."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _data_path(doc: YamlDocument, loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """Drop the parts pydantic adds to a location (union members, validator names)."""
    path: tuple[str | int, ...] = ()
    for part in loc:
        if isinstance(part, int) and path + (part,) not in doc.lines:
            continue  # a list index the file does not have: `match` written as one clause
        if isinstance(part, int) or part in _SCHEMA_FIELDS or path + (part,) in doc.lines:
            path += (part,)
    return path


_SCHEMA_FIELDS = {
    name for model in (Runbook, Rung, Match, RetryPolicy) for name in model.model_fields
}


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "-"
