"""All-or-nothing runbook loading with errors that name file, line and field."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from remedy.runbook.schema import AUTHORING, Match, RetryPolicy, Runbook, Rung
from remedy.yaml_source import YamlDocument, YamlSyntaxError, read_yaml

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


def load_runbooks(paths: Iterable[str | Path]) -> list[Runbook]:
    """Load every runbook under ``paths``: all of them, or RunbookError listing every problem."""
    problems: list[RunbookProblem] = []
    loaded: list[Runbook] = []
    first_seen: dict[str, str] = {}
    files = runbook_files(paths)
    if not files:
        raise RunbookError(
            [RunbookProblem(str(p), 1, "-", "no runbook files found") for p in paths]
            or [RunbookProblem("-", 1, "-", "no paths given")]
        )
    for file in files:
        runbook, file_problems, name_line = _load_file(file)
        problems.extend(file_problems)
        if runbook is None:
            continue
        if runbook.name in first_seen:
            problems.append(
                RunbookProblem(
                    str(file),
                    name_line,
                    "name",
                    f"duplicate runbook name {runbook.name!r}, "
                    f"first defined in {first_seen[runbook.name]}",
                )
            )
            continue
        first_seen[runbook.name] = str(file)
        loaded.append(runbook)
    if problems:
        raise RunbookError(problems)
    return loaded


def _load_file(file: Path) -> tuple[Runbook | None, list[RunbookProblem], int]:
    name = str(file)
    try:
        doc = read_yaml(file)
    except (OSError, UnicodeDecodeError) as exc:
        return None, [RunbookProblem(name, 1, "-", f"cannot read: {exc}")], 1
    except YamlSyntaxError as exc:
        return None, [RunbookProblem(name, exc.line, "-", str(exc))], 1
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
        return None, problems, 1
    try:
        runbook = Runbook.model_validate(doc.data, extra="forbid", context=AUTHORING)
    except ValidationError as exc:
        problems.extend(_problems_from(name, doc, exc))
        return None, problems, 1
    if problems:
        return None, problems, 1
    return runbook, [], doc.line_of(("name",))


def _problems_from(file: str, doc: YamlDocument, exc: ValidationError) -> list[RunbookProblem]:
    out = []
    for error in exc.errors():
        path = _data_path(doc, error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "required field is missing"
        elif error["type"] == "extra_forbidden":
            message = "unknown field"
        out.append(RunbookProblem(file, doc.line_of(path), _dotted(path), message))
    return out


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
