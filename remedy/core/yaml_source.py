"""Safe, bounded YAML with line numbers: builds plain Python data and remembers where each
field sits. Runbooks, the attribution rules and the Xid catalog are all read here.

PyYAML's safe loader silently keeps the last of two duplicate keys and forgets positions; a
runbook error must name file, line and field, so the node tree is walked here instead. It also
expands aliases without limit (a few hundred bytes of ``&a [*b, *b, ...]`` become billions of
values) and recurses once per level of nesting, so size, expanded values and depth are capped:
a file past a cap is one clear error, never minutes of CPU, gigabytes or a stack overflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

# Shipped runbooks are ~1 KB and the largest data file (the Xid catalog) ~41 KB. PyYAML's pure
# Python parser reads ~150 KB/s, so 256 KiB keeps even a file at the cap under two seconds.
MAX_BYTES = 256 * 1024
# Values built after expanding aliases: the catalog builds ~3,200. A bomb stops here in ~0.1 s.
MAX_VALUES = 100_000
# Levels of nesting: runbooks use 5. Both PyYAML's composer and the walk below recurse per level.
MAX_DEPTH = 64

KeyPath = tuple[str | int, ...]


@dataclass
class YamlDocument:
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    duplicates: list[tuple[KeyPath, int]] = field(default_factory=list)

    def line_of(self, path: KeyPath) -> int:
        """The line of the deepest known part of ``path`` (a missing field: its parent's line)."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 1


class YamlSyntaxError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


class YamlFileError(ValueError):
    """A file that cannot be used: one ``FILE:LINE: FIELD: problem`` line per problem."""


M = TypeVar("M", bound=BaseModel)


def load_model(path: Path, model: type[M]) -> M:
    """``path`` read and validated as ``model``, all or nothing: every problem is reported
    (duplicate keys, each field pydantic refused), each with the line it is on."""
    try:
        doc = read_yaml(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlFileError(f"{path}: cannot read: {exc}") from None
    except YamlSyntaxError as exc:
        raise YamlFileError(f"{path}:{exc.line}: {exc}") from None
    problems = [f"{path}:{line}: {dotted(at)}: duplicate key" for at, line in doc.duplicates]
    try:
        loaded = model.model_validate(doc.data)
    except ValidationError as exc:
        problems += [
            f"{path}:{doc.line_of(e['loc'])}: {dotted(e['loc'])}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        ]
    if problems:
        raise YamlFileError("\n".join(problems))
    return loaded


def dotted(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in loc) or "-"


def read_yaml(path: Path) -> YamlDocument:
    """Read and parse ``path``, refusing a file over MAX_BYTES before reading it whole.
    Raises OSError or UnicodeDecodeError when it cannot be read, YamlSyntaxError when it is
    not acceptable YAML."""
    with path.open("rb") as stream:
        raw = stream.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            size = path.stat().st_size
            raise YamlSyntaxError(1, _too_large(size if size > MAX_BYTES else None))
    return parse_yaml(raw.decode("utf-8"))


def parse_yaml(text: str) -> YamlDocument:
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_BYTES:
        raise YamlSyntaxError(1, _too_large(size))
    root, aliases = _compose(text)
    doc = YamlDocument(data=None)
    if root is None:
        return doc
    doc.data = _Builder(doc, aliases).build(root, ())
    return doc


def _compose(text: str) -> tuple[Node | None, int]:
    """The node graph (aliases not yet expanded) and how many aliases it uses."""
    try:
        loader = _BoundedLoader(text)  # the reader checks every character here
        try:
            return loader.get_single_node(), loader.aliases
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise YamlSyntaxError(line, f"invalid YAML: {exc.problem or exc}") from None
    except ReaderError as exc:  # a control character YAML forbids; it has no mark, a position
        line = text.count("\n", 0, exc.position) + 1
        said = f"#x{exc.character:04x}" if isinstance(exc.character, int) else "a character"
        raise YamlSyntaxError(line, f"invalid YAML: {said}: {exc.reason}") from None


def _too_large(size: int | None) -> str:
    said = f"{size} bytes" if size is not None else f"more than {MAX_BYTES} bytes"
    return f"too large ({said}, the limit is {MAX_BYTES})"


def _nested_too_deep() -> str:
    return f"nested too deep (more than {MAX_DEPTH} levels, the limit is {MAX_DEPTH})"


class _BoundedLoader(yaml.SafeLoader):
    """The safe composer, refusing nesting past MAX_DEPTH before it recurses, and counting
    aliases for the error a bomb gets."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0
        self.aliases = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            self.aliases += 1
        if self.depth >= MAX_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise YamlSyntaxError(event.start_mark.line + 1, _nested_too_deep())
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_PLAIN_TAGS: dict[type[Node], str] = {
    MappingNode: "tag:yaml.org,2002:map",
    SequenceNode: "tag:yaml.org,2002:seq",
}


class _Builder:
    """Walks the node graph into plain data; an alias is walked again wherever it is used,
    so the count of values built is what aliases expand to."""

    def __init__(self, doc: YamlDocument, aliases: int) -> None:
        self.doc = doc
        self.aliases = aliases
        self.values = 0
        self.scalars = SafeConstructor()

    def build(self, node: Node, path: KeyPath) -> Any:
        line = node.start_mark.line + 1
        self.values += 1
        if self.values > MAX_VALUES:
            raise YamlSyntaxError(line, self._too_many())
        if len(path) >= MAX_DEPTH:  # aliases nest deeper than the text does
            raise YamlSyntaxError(line, _nested_too_deep())
        self.doc.lines.setdefault(path, line)
        expected = _PLAIN_TAGS.get(type(node))
        if expected and node.tag != expected:
            # Safe loading only: no !!python/object or other constructors.
            raise YamlSyntaxError(line, f"unsupported YAML tag {node.tag}")
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.build(item, path + (i,)) for i, item in enumerate(node.value)]
        if isinstance(node, ScalarNode):
            try:
                return self.scalars.construct_object(node, deep=True)
            except ConstructorError as exc:
                # Unknown tags (!!python/object, ...) end here: safe loading only.
                raise YamlSyntaxError(line, f"unsupported YAML: {exc.problem}") from None
            except (ValueError, TypeError, AttributeError, ArithmeticError, LookupError) as exc:
                # A value its (implicit or explicit) type cannot hold: 2024-02-30, !!int "".
                kind = node.tag.rsplit(":", 1)[-1]
                detail = f": {exc}" if isinstance(exc, ValueError) else ""
                raise YamlSyntaxError(line, f"invalid {kind} {node.value!r}{detail}") from None
        raise YamlSyntaxError(line, f"unsupported YAML node {node.tag}")

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.build(key_node, path + ("<key>",))
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise YamlSyntaxError(key_node.start_mark.line + 1, "keys must be plain names")
            child = path + (key,)
            if key in out:
                self.doc.duplicates.append((child, key_node.start_mark.line + 1))
                continue
            self.doc.lines[child] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, child)
        return out

    def _too_many(self) -> str:
        if self.aliases:
            return (
                f"too many aliases: {self.aliases} aliases expand to more than {MAX_VALUES} "
                f"values (the limit is {MAX_VALUES})"
            )
        return f"too many values (more than {MAX_VALUES}, the limit is {MAX_VALUES})"
