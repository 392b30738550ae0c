"""Safe YAML with line numbers: builds plain Python data and remembers where each field sits.

PyYAML's safe loader silently keeps the last of two duplicate keys and forgets positions; a
runbook error must name file, line and field, so the node tree is walked here instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path = tuple[str | int, ...]


@dataclass
class YamlDocument:
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)

    def line_of(self, path: Path) -> int:
        """The line of the deepest known part of ``path`` (a missing field: its parent's line)."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return 1


class YamlSyntaxError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def parse_yaml(text: str) -> YamlDocument:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise YamlSyntaxError(line, f"invalid YAML: {exc.problem or exc}") from None
    doc = YamlDocument(data=None)
    if root is None:
        return doc
    doc.data = _build(root, (), doc, SafeConstructor())
    return doc


_PLAIN_TAGS: dict[type[Node], str] = {
    MappingNode: "tag:yaml.org,2002:map",
    SequenceNode: "tag:yaml.org,2002:seq",
}


def _build(node: Node, path: Path, doc: YamlDocument, scalars: SafeConstructor) -> Any:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    expected = _PLAIN_TAGS.get(type(node))
    if expected and node.tag != expected:
        # Safe loading only: no !!python/object or other constructors.
        raise YamlSyntaxError(node.start_mark.line + 1, f"unsupported YAML tag {node.tag}")
    if isinstance(node, MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _build(key_node, path + ("<key>",), doc, scalars)
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise YamlSyntaxError(key_node.start_mark.line + 1, "keys must be plain names")
            child = path + (key,)
            if key in out:
                doc.duplicates.append((child, key_node.start_mark.line + 1))
                continue
            doc.lines[child] = key_node.start_mark.line + 1
            out[key] = _build(value_node, child, doc, scalars)
        return out
    if isinstance(node, SequenceNode):
        return [_build(item, path + (i,), doc, scalars) for i, item in enumerate(node.value)]
    if isinstance(node, ScalarNode):
        try:
            return scalars.construct_object(node, deep=True)
        except ConstructorError as exc:
            # Unknown tags (!!python/object, ...) end here: safe loading only.
            raise YamlSyntaxError(
                node.start_mark.line + 1, f"unsupported YAML: {exc.problem}"
            ) from None
    raise YamlSyntaxError(node.start_mark.line + 1, f"unsupported YAML node {node.tag}")
