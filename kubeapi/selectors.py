"""Label and field selectors as the API server parses them: label selectors with ``=``, ``==``,
``!=``, ``in``, ``notin``, existence and ``!key``; field selectors only on the fields each
resource supports (anything else is a 400, as on a real server)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubeapi.status import ApiError

Json = dict[str, Any]
Match = Callable[[Json], bool]

# The fields each resource lets a field selector use (metadata.name/namespace everywhere).
FIELDS: dict[str, dict[str, Callable[[Json], str]]] = {
    "pods": {
        "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", ""),
        "status.phase": lambda o: o.get("status", {}).get("phase", ""),
        "spec.restartPolicy": lambda o: o.get("spec", {}).get("restartPolicy", ""),
    },
    "nodes": {
        "spec.unschedulable": lambda o: str(bool(o.get("spec", {}).get("unschedulable"))).lower()
    },
    "resourceslices": {
        "spec.nodeName": lambda o: o.get("spec", {}).get("nodeName", ""),
        "spec.driver": lambda o: o.get("spec", {}).get("driver", ""),
    },
    "events": {
        "involvedObject.name": lambda o: o.get("involvedObject", {}).get("name", ""),
        "involvedObject.kind": lambda o: o.get("involvedObject", {}).get("kind", ""),
        "involvedObject.uid": lambda o: o.get("involvedObject", {}).get("uid", ""),
        "reason": lambda o: o.get("reason", ""),
    },
}
_COMMON: dict[str, Callable[[Json], str]] = {
    "metadata.name": lambda o: o.get("metadata", {}).get("name", ""),
    "metadata.namespace": lambda o: o.get("metadata", {}).get("namespace", ""),
}
_SET = re.compile(r"^\s*(!?)\s*([^\s!=]+)\s*(?:(notin|in)\s*\(([^)]*)\)|(==|!=|=)\s*(\S*))?\s*$")


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p for p in [*parts, current] if p.strip()]


def label_selector(selector: str | None) -> Match:
    if not selector:
        return lambda _: True
    tests: list[Match] = []
    for part in _split(selector):
        m = _SET.match(part)
        if m is None:
            raise ApiError(400, f"unable to parse requirement: {part!r}")
        negate, key, set_op, values, op, value = m.groups()
        tests.append(_requirement(bool(negate), key, set_op, values, op, value))
    return lambda obj: all(t(obj.get("metadata", {}).get("labels") or {}) for t in tests)


def _requirement(
    negate: bool,
    key: str,
    set_op: str | None,
    values: str | None,
    op: str | None,
    value: str | None,
) -> Callable[[dict[str, str]], bool]:
    if set_op:
        allowed = {v.strip() for v in (values or "").split(",") if v.strip()}
        if set_op == "in":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    if op in ("=", "=="):
        return lambda labels: labels.get(key) == value
    if op == "!=":
        return lambda labels: labels.get(key) != value
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def field_selector(plural: str, selector: str | None) -> Match:
    if not selector:
        return lambda _: True
    known = _COMMON | FIELDS.get(plural, {})
    tests: list[Match] = []
    for part in _split(selector):
        m = re.match(r"^\s*([\w.]+)\s*(==|!=|=)\s*(\S*)\s*$", part)
        if m is None:
            raise ApiError(400, f"invalid field selector: {part!r}")
        name, op, value = m.groups()
        if name not in known:
            raise ApiError(400, f'field label not supported: "{name}"')
        tests.append(_field_test(known[name], op == "!=", value))
    return lambda obj: all(t(obj) for t in tests)


def _field_test(read: Callable[[Json], str], negate: bool, value: str) -> Match:
    def test(obj: Json) -> bool:
        return (read(obj) == value) != negate

    return test
