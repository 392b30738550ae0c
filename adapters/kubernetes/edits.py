"""Changing a Node the way the API server allows it: each change is decided on the node as read
and sent with that read's ``resourceVersion`` (a 409 reads it again and decides again), and a
taint list keeps each key and effect once (the server refuses a list with two: 422)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import AGENT_MANAGER, CONTROLLER_MANAGER, Json, meta
from remedy.core.errors import Conflict, TransientError

T = TypeVar("T")
CONFLICT_RETRIES = 5
# The field managers remedy's node changes carry (the controller's, and a node's agent that
# cordons its own node for its ladder to adopt): the API server then records which fields remedy
# set last (metadata.managedFields), and who set them since.
OWN_MANAGERS = (CONTROLLER_MANAGER, AGENT_MANAGER)


def as_read(nodes: NodeApi, node: str, decide: Callable[[Json], T]) -> T:
    """``decide(current)`` on a fresh read of the node; it sends its change with ``patch``.
    Someone else changing the node in between (409) means deciding again on what they left."""
    for _ in range(CONFLICT_RETRIES):
        current = nodes.node(node)
        try:
            return decide(current)
        except Conflict:  # its write found the node changed
            continue
    raise TransientError(f"node {node} kept changing: {CONFLICT_RETRIES} conflicts")


def patch(nodes: NodeApi, current: Json, body: Json) -> None:
    """A strategic merge patch of the node as read: refused (409) if it changed since."""
    name = meta(current)["name"]
    body_meta = body.setdefault("metadata", {})
    body_meta["resourceVersion"] = meta(current).get("resourceVersion")
    with api_errors("patch", f"nodes/{name}"):
        nodes.core.patch_node(name, body, field_manager=nodes.field_manager)


def set_by_others_since(node: Json, *path: str) -> bool:
    """Whether the API server's field tracking says a manager other than remedy set the field
    at ``path`` (``"spec", "unschedulable"``) after remedy did: a write that changes a field
    moves it to the writer. Only where remedy's own writes are tracked: with no entry of
    remedy's (a server without field tracking, a cordon by an older remedy) nothing can be
    told from it, and the answer is False."""
    entries = meta(node).get("managedFields") or []
    if not any(e.get("manager") in OWN_MANAGERS for e in entries):
        return False

    def owns(entry: Json) -> bool:
        fields = entry.get("fieldsV1") or {}
        for name in path:
            fields = fields.get(f"f:{name}")
            if fields is None:
                return False
        return True

    return any(e.get("manager") not in OWN_MANAGERS and owns(e) for e in entries)


def _same(a: Json, b: Json) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def has_own_taint(node: Json, taint: Json) -> bool:
    return any(_same(t, taint) for t in node.get("spec", {}).get("taints") or [])


def with_taint(node: Json, taint: Json) -> list[Json]:
    """The node's taints with ``taint`` added unless one with its key and effect is there
    (``kubectl uncordon`` leaves remedy's taint: cordoning again must not add a second)."""
    taints: list[Json] = list(node.get("spec", {}).get("taints") or [])
    return taints if has_own_taint(node, taint) else [*taints, taint]


def without_taint(node: Json, taint: Json) -> list[Json]:
    """The node's taints without ``taint`` (its key and effect): others' stay as they are."""
    return [t for t in node.get("spec", {}).get("taints") or [] if not _same(t, taint)]
