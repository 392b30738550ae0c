"""The Kubernetes OpenAPI schemas (as the ``kubernetes-validate`` package ships them): what a
field is, which fields exist, and each list's patch strategy and merge key — the facts strategic
merge patch and request validation are built on, read from the same source the API server's
are generated from."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

VERSION = "1.37.0"
Schema = dict[str, Any]


@cache
def _definitions() -> dict[str, Schema]:
    path = _schema_dir().joinpath("_definitions.json")
    defs: dict[str, Schema] = json.loads(path.read_text())["$defs"]
    return defs


def _schema_dir() -> Any:
    return resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/v{VERSION}-local-strict"
    )


@cache
def kind_schema(kind: str, group_version: str) -> Schema:
    """The top-level schema of a built-in kind (``Node``, ``v1``; ``Job``, ``batch/v1``)."""
    group, _, version = group_version.rpartition("/")
    suffix = f"{group.split('.')[0]}-{version}" if group else version
    text = _schema_dir().joinpath(f"{kind.lower()}-{suffix}.json").read_text()
    # Its references point into the shared definitions file: make them local ones.
    schema: Schema = json.loads(text.replace('"/api/_definitions.json#/', '"#/'))
    return schema


def resolve(schema: Schema | None) -> Schema | None:
    """Follow ``$ref`` (and a single-entry ``allOf``) to the schema that describes a value."""
    while schema is not None:
        if "$ref" in schema:
            schema = _definitions()[schema["$ref"].rsplit("/", 1)[-1]]
        elif "allOf" in schema and len(schema["allOf"]) == 1:
            schema = schema["allOf"][0]
        else:
            return schema
    return None


def ref_name(schema: Schema | None) -> str | None:
    if schema and "$ref" in schema:
        name: str = schema["$ref"].rsplit("/", 1)[-1]
        return name
    return None


def field(schema: Schema | None, name: str) -> Schema | None:
    """The schema of ``name`` inside an object's schema (``additionalProperties`` for maps)."""
    schema = resolve(schema)
    if schema is None:
        return None
    props = schema.get("properties")
    if props is not None and name in props:
        found: Schema = props[name]
        return found
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def items(schema: Schema | None) -> Schema | None:
    schema = resolve(schema)
    return schema.get("items") if schema else None


def patch_strategy(schema: Schema | None) -> tuple[bool, str | None]:
    """(merge?, merge key) of a list field: lists merge only where the type says so."""
    if schema is None:
        return False, None
    strategy = str(schema.get("x-kubernetes-patch-strategy", ""))
    return "merge" in strategy.split(","), schema.get("x-kubernetes-patch-merge-key")


def prune_unknown(
    value: Any, schema: Schema | None, path: str, extra: dict[str, set[str]]
) -> list[str]:
    """Drop the fields the schema does not know (``extra``: fields a newer server would know,
    by definition name) and return their paths: what the API server's field validation warns
    about or, when the client asks for Strict, refuses."""
    name, schema = ref_name(schema), resolve(schema)
    if schema is None:
        return []
    unknown: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is None:
            inner = schema.get("additionalProperties")
            for key, item in value.items():
                if isinstance(inner, dict):
                    unknown += prune_unknown(item, inner, f"{path}.{key}", extra)
            return unknown
        allowed = extra.get(name or "", set())
        for key in list(value):
            if key in props:
                unknown += prune_unknown(value[key], props[key], f"{path}.{key}", extra)
            elif key not in allowed:
                unknown.append(f"{path}.{key}".lstrip("."))
                del value[key]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            unknown += prune_unknown(item, schema.get("items"), f"{path}[{i}]", extra)
    return unknown


@cache
def _validator(kind: str, group_version: str) -> jsonschema.protocols.Validator:
    # One self-contained document: the kind's schema with the shared definitions inline.
    schema = {k: v for k, v in kind_schema(kind, group_version).items() if k != "$id"}
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        schema | {"$defs": _definitions()}
    )
    return validator


def type_errors(obj: dict[str, Any], kind: str, group_version: str) -> list[tuple[str, str]]:
    """Each value of the wrong type or form, as (field path, message)."""
    errors = []
    for error in _validator(kind, group_version).iter_errors(obj):
        where = ".".join(str(p) for p in error.absolute_path) or "<root>"
        errors.append((where, error.message))
    return errors
