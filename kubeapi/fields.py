"""Field ownership as the API server records it (``metadata.managedFields``) for Update
operations: the fields a write changed move to its field manager (the ``fieldManager``
parameter, else the client's user agent), taken from whoever held them. Simplified where remedy
does not look: a changed list or scalar is owned whole (no ``k:``/``v:`` item keys)."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
Path = tuple[str, ...]
# Set by the server, not by a writer: never owned.
SERVER_SET = {
    "resourceVersion",
    "generation",
    "managedFields",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
}


def changed(old: Any, new: Any, at: Path = ()) -> list[Path]:
    """The leaf paths whose value differs (maps are walked, anything else is a leaf)."""
    if isinstance(old, dict) and isinstance(new, dict):
        paths: list[Path] = []
        for key in sorted(set(old) | set(new)):
            if at == ("metadata",) and key in SERVER_SET:
                continue
            if key not in new or key not in old or old[key] != new[key]:
                paths += changed(old.get(key), new.get(key), (*at, key))
        return paths
    return [at] if old != new and at else []


def track(new: Json, old: Json | None, manager: str, api_version: str, time: str) -> None:
    """Give ``manager`` the fields this write changed, in ``new``'s managedFields (``time``:
    the write's, on the server's clock)."""
    paths = [p for p in changed(old or {}, new) if p and p[0] not in ("apiVersion", "kind")]
    if not paths:
        return
    meta = new.setdefault("metadata", {})
    entries: list[Json] = [dict(e) for e in meta.get("managedFields") or []]
    mine = next((e for e in entries if e.get("manager") == manager), None)
    if mine is None:
        mine = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        entries.append(mine)
    mine["time"] = time
    for path in paths:
        for entry in entries:
            if entry is not mine:
                _drop(entry.setdefault("fieldsV1", {}), path)
        _own(mine.setdefault("fieldsV1", {}), path)
    meta["managedFields"] = [e for e in entries if e.get("fieldsV1")]


def _own(fields: Json, path: Path) -> None:
    for name in path:
        fields = fields.setdefault(f"f:{name}", {})


def _drop(fields: Json, path: Path) -> None:
    key = f"f:{path[0]}"
    if key not in fields:
        return
    if len(path) == 1:
        del fields[key]
        return
    _drop(fields[key], path[1:])
    if not fields[key]:
        del fields[key]  # nothing left under it that this manager set
