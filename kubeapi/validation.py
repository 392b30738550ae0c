"""The API server's own validation of the rules remedy could break: names, label and annotation
syntax and size, unique taints, an Event's namespace, and what an update may not change. Each
broken rule is a (field, message) pair; the server answers 422 with all of them."""

from __future__ import annotations

import json
import re
from typing import Any

Json = dict[str, Any]
Errors = list[tuple[str, str]]

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ANNOTATIONS_MAX_BYTES = 256 * 1024


def object_errors(kind: str, obj: Json) -> Errors:
    meta = obj.get("metadata", {})
    errors = _name_errors(kind, meta.get("name", ""))
    for key, value in (meta.get("labels") or {}).items():
        errors += _qualified_name_errors(f"metadata.labels[{key}]", key)
        errors += _label_value_errors(f"metadata.labels[{key}]", value)
    annotations = meta.get("annotations") or {}
    for key in annotations:
        errors += _qualified_name_errors(f"metadata.annotations[{key}]", key)
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        errors.append(
            ("metadata.annotations", f"Too long: must have at most {ANNOTATIONS_MAX_BYTES} bytes")
        )
    if kind == "Node":
        errors += _taint_errors(obj.get("spec", {}).get("taints") or [])
    if kind == "Event":
        errors += _event_errors(obj)
    return errors


def update_errors(kind: str, old: Json, new: Json) -> Errors:
    """What no update may change: a pod's spec beyond the few mutable fields, a Job's template."""
    errors: Errors = []
    if kind == "Pod":
        old_spec, new_spec = dict(old.get("spec", {})), dict(new.get("spec", {}))
        for mutable in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
            old_spec.pop(mutable, None)
            new_spec.pop(mutable, None)
        if _images_stripped(old_spec) != _images_stripped(new_spec):
            errors.append(
                (
                    "spec",
                    "Forbidden: pod updates may not change fields other than "
                    "`spec.containers[*].image`, `spec.activeDeadlineSeconds`, "
                    "`spec.tolerations` (only additions to existing tolerations)",
                )
            )
    if kind == "Job":
        if old.get("spec", {}).get("template") != new.get("spec", {}).get("template"):
            errors.append(("spec.template", "Invalid value: field is immutable"))
    return errors


def _images_stripped(spec: Json) -> str:
    spec = json.loads(json.dumps(spec))
    for container in spec.get("containers", []):
        container.pop("image", None)
    return json.dumps(spec, sort_keys=True)


def _name_errors(kind: str, name: str) -> Errors:
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    limit = 63 if kind == "Namespace" else 253
    if len(name) > limit:
        return [
            ("metadata.name", f"Invalid value: {name!r}: must be no more than {limit} characters")
        ]
    if not DNS_SUBDOMAIN.match(name) or (kind == "Namespace" and "." in name):
        return [
            (
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must "
                "consist of lower case alphanumeric characters, '-' or '.'",
            )
        ]
    return []


def _qualified_name_errors(field: str, key: str) -> Errors:
    prefix, _, name = key.rpartition("/")
    errors: Errors = []
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        errors.append((field, f"Invalid value: {key!r}: prefix part must be a DNS subdomain"))
    if len(name) > 63 or not _NAME.match(name):
        errors.append(
            (
                field,
                f"Invalid value: {key!r}: name part must be no more than 63 "
                "characters of alphanumerics, '-', '_' or '.', starting and ending with "
                "an alphanumeric",
            )
        )
    return errors


def _label_value_errors(field: str, value: Any) -> Errors:
    if not isinstance(value, str):
        return [(field, f"Invalid value: {value!r}: a label value is a string")]
    if value and (len(value) > 63 or not _NAME.match(value)):
        return [
            (
                field,
                f"Invalid value: {value!r}: must be 63 characters or less and must be "
                "empty or begin and end with an alphanumeric character",
            )
        ]
    return []


def _taint_errors(taints: list[Json]) -> Errors:
    errors: Errors = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        where = f"spec.taints[{i}]"
        key, effect = taint.get("key", ""), taint.get("effect", "")
        errors += _qualified_name_errors(f"{where}.key", key)
        errors += _label_value_errors(f"{where}.value", taint.get("value", ""))
        if effect not in TAINT_EFFECTS:
            errors.append((f"{where}.effect", f"Unsupported value: {effect!r}"))
        if (key, effect) in seen:
            errors.append(
                (
                    f"{where}",
                    f"Duplicate value: taints must be unique by key and "
                    f"effect pair ({key}:{effect})",
                )
            )
        seen.add((key, effect))
    return errors


def _event_errors(event: Json) -> Errors:
    namespace = event.get("metadata", {}).get("namespace", "")
    involved = event.get("involvedObject", {}).get("namespace", "")
    if not involved:
        if namespace not in ("", "default"):
            return [("involvedObject.namespace", "Invalid value: does not match event.namespace")]
        return []
    if involved != namespace:
        return [("involvedObject.namespace", "Invalid value: does not match event.namespace")]
    return []
