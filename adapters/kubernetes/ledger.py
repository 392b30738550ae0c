"""A node's keyed actions, kept on the Node object itself (the annotation
``remedy.io/actions``): where a drain or a job kill lands, so a repeat of the same key — a
retry after a lost answer — finds it there and answers what the first did (remedy/core/once.py).

Every write is a patch of the one annotation on the version just read (``resourceVersion``):
a concurrent writer makes it read again (409), so no other ladder's entry is lost and two
attempts cannot both claim a key."""

from __future__ import annotations

import json
import logging
from typing import Any

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import Json, meta
from remedy.core.errors import Conflict
from remedy.core.once import LedgerEntry, find, with_entry

ACTIONS_ANNOTATION = f"{PREFIX}/actions"
CONFLICT_RETRIES = 5
log = logging.getLogger(__name__)


class NodeLedger:
    def __init__(self, nodes: NodeApi, node: str) -> None:
        self._nodes, self._node = nodes, node

    def claim(self, entry: LedgerEntry) -> LedgerEntry | None:
        for _ in range(CONFLICT_RETRIES):
            current = self._nodes.node(self._node)
            book = _book(current)
            recorded = find(book, entry.key)
            if recorded is not None:
                return recorded
            try:
                self._write(current, with_entry(book, entry))
                return None
            except Conflict:
                continue
        raise Conflict(f"node {self._node} kept changing: {CONFLICT_RETRIES} conflicts")

    def record(self, entry: LedgerEntry) -> None:
        for _ in range(CONFLICT_RETRIES):
            current = self._nodes.node(self._node)
            try:
                self._write(current, with_entry(_book(current), entry))
                return
            except Conflict:
                continue
        raise Conflict(f"node {self._node} kept changing: {CONFLICT_RETRIES} conflicts")

    def _write(self, current: Json, book: list[Any]) -> None:
        body = {
            "metadata": {
                "resourceVersion": meta(current).get("resourceVersion"),
                "annotations": {ACTIONS_ANNOTATION: json.dumps(book, separators=(",", ":"))},
            }
        }
        with api_errors("patch", f"nodes/{self._node}"):
            self._nodes.core.patch_node(self._node, body, field_manager=self._nodes.field_manager)


def _book(node: Json) -> list[Any]:
    text = meta(node).get("annotations", {}).get(ACTIONS_ANNOTATION, "[]")
    try:
        book = json.loads(text)
    except ValueError:
        book = None
    if not isinstance(book, list):
        log.warning(
            "%s: %s is not a list of actions; starting it again",
            meta(node).get("name"),
            ACTIONS_ANNOTATION,
        )
        return []
    return book
