"""The three PATCH types kube-apiserver applies, with their real semantics:

- JSON merge patch (RFC 7386): maps merge, ``null`` deletes, lists are replaced whole;
- strategic merge patch: like merge patch, except lists whose type declares
  ``patchStrategy: merge`` merge item by item on their ``patchMergeKey`` (a node's conditions by
  ``type``, a pod's containers by ``name``), with the ``$patch`` directives; lists without it
  (a node's taints) are replaced whole. The strategies come from the OpenAPI schema;
- JSON patch (RFC 6902): add, remove, replace, move, copy and test by JSON pointer.
"""

from __future__ import annotations

import copy
from typing import Any

from kubeapi import schema as schemas
from kubeapi.status import ApiError

Json = dict[str, Any]


def merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(original: Any, patch: Any, schema: schemas.Schema | None) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise ApiError(400, f"unknown patch directive {directive!r}")
    out = dict(original) if isinstance(original, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue  # ordering and retention hints: the order of what is kept is unchanged
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [v for v in out.get(name, []) if v not in value]
            continue
        sub = schemas.field(schema, key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, sub)
        else:
            merged = strategic_merge_patch(out.get(key), value, sub)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    return out


def _merge_list(original: Any, patch: list[Any], schema: schemas.Schema | None) -> list[Any]:
    merge, merge_key = schemas.patch_strategy(schema)
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if not merge or not isinstance(original, list):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if merge_key is None:  # a list of scalars that merges: a union, in order
        return [*original, *(v for v in patch if v not in original)]
    item_schema = schemas.items(schema)
    out = [copy.deepcopy(i) for i in original]
    added = []  # items the original lacks come first, as the API server orders them
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError(400, f"map: {item!r} does not contain declared merge key: {merge_key}")
        at = next((i for i, o in enumerate(out) if o.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            added.append(strategic_merge_patch({}, item, item_schema))
        else:
            out[at] = strategic_merge_patch(out[at], item, item_schema)
    return added + out


def json_patch(original: Json, operations: Any) -> Json:
    if not isinstance(operations, list):
        raise ApiError(400, "a JSON patch is a list of operations")
    doc = copy.deepcopy(original)
    for op in operations:
        doc = _apply(doc, op)
    return doc


def _apply(doc: Any, op: Json) -> Any:
    kind, path = op.get("op"), op.get("path", "")
    if kind == "test":
        if _get(doc, path) != op.get("value"):
            raise ApiError(422, f"the test operation at {path} failed")
        return doc
    if kind == "remove":
        return _remove(doc, path)
    if kind in ("add", "replace"):
        if kind == "replace":
            _get(doc, path)  # must exist
            doc = _remove(doc, path)
        return _add(doc, path, copy.deepcopy(op.get("value")))
    if kind in ("move", "copy"):
        value = copy.deepcopy(_get(doc, op.get("from", "")))
        if kind == "move":
            doc = _remove(doc, op["from"])
        return _add(doc, path, value)
    raise ApiError(400, f"unknown JSON patch operation {kind!r}")


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(400, f"bad JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _get(doc: Any, path: str) -> Any:
    for token in _tokens(path):
        try:
            doc = doc[int(token)] if isinstance(doc, list) else doc[token]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, f"the JSON patch path {path} does not exist") from None
    return doc


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise ApiError(422, "a JSON patch cannot replace the whole object here")
    parent = _get(doc, "".join(f"/{t.replace('~', '~0').replace('/', '~1')}" for t in tokens[:-1]))
    return parent, tokens[-1]


def _add(doc: Any, path: str, value: Any) -> Any:
    parent, last = _parent(doc, path)
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if index > len(parent):
            raise ApiError(422, f"the JSON patch index {path} is out of range")
        parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, f"the JSON patch path {path} does not exist")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parent, last = _parent(doc, path)
    try:
        if isinstance(parent, list):
            del parent[int(last)]
        else:
            del parent[last]
    except (KeyError, IndexError, ValueError, TypeError):
        raise ApiError(422, f"the JSON patch path {path} does not exist") from None
    return doc
