"""A node's keyed actions, kept on the Node object itself (the annotation
``remedy.io/actions``): where a drain or a job kill lands, so a repeat of the same key — a
retry after a lost answer — finds it there and answers what the first did (remedy/once.py)."""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import Json, meta
from remedy.errors import TransientError
from remedy.once import LedgerEntry, kept

ACTIONS_ANNOTATION = f"{PREFIX}/actions"
CONFLICT_RETRIES = 5
_ENTRIES = TypeAdapter(list[LedgerEntry])


class NodeLedger:
    def __init__(self, nodes: NodeApi, node: str) -> None:
        self._nodes, self._node = nodes, node

    def entry(self, key: str) -> LedgerEntry | None:
        return next((e for e in _entries(self._nodes.node(self._node)) if e.key == key), None)

    def record(self, entry: LedgerEntry) -> None:
        """A merge patch of the one annotation, on the version read: a concurrent writer
        (a 409) makes it read again, so no entry of another ladder is lost."""
        for _ in range(CONFLICT_RETRIES):
            current = self._nodes.node(self._node)
            entries = kept(_entries(current), entry)
            body = json.dumps([e.model_dump(mode="json") for e in entries], separators=(",", ":"))
            patch = {
                "metadata": {
                    "resourceVersion": meta(current).get("resourceVersion"),
                    "annotations": {ACTIONS_ANNOTATION: body},
                }
            }
            try:
                with api_errors("patch", f"nodes/{self._node}"):
                    self._nodes.core.patch_node(self._node, patch)
                return
            except TransientError as exc:
                if "409" not in str(exc):
                    raise
        raise TransientError(f"node {self._node} kept changing: {CONFLICT_RETRIES} conflicts")


def _entries(node: Json) -> list[LedgerEntry]:
    kept_json = meta(node).get("annotations", {}).get(ACTIONS_ANNOTATION, "[]")
    try:
        return _ENTRIES.validate_json(kept_json)
    except ValidationError:
        return []  # a hand-edited annotation: start the book again rather than stop acting
