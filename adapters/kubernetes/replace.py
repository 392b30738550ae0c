"""Replacing a node on Kubernetes: one ``Replacer`` per way a cluster gets new hardware, chosen
by name (``remedy controller --replace-provider``) from ``REPLACERS``.

To add one (a cloud's API, say): a class built from the ``NodeApi`` (Events, dry run) whose
``replace_node(node, current)`` does the work on the node as read (its ``spec.providerID``) and
says what it did, or raises ActionRefused; then one entry in ``REPLACERS``. ``OncePerNode``
around every one makes a repeat of the same replacement a no-op. Nothing else changes: the
replace activity and the workflows see only the ``Replacer`` seam."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, cast

from kubernetes import client as k8s

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.listing import PAGE, list_pages
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import Json, meta
from adapters.kubernetes.repairers import NODECLAIM_RESOURCE, NODECLAIMS, claim_name
from remedy.core.errors import ActionRefused, Conflict, NodeGone
from remedy.core.events import EventReason
from remedy.scan.cluster import Replacer

KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"


class KarpenterReplacer:
    """Delete the NodeClaim that owns the node: Karpenter provisions a replacement."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes, self._custom = nodes, k8s.CustomObjectsApi(nodes.api)

    def replace_node(self, node: str, current: Json) -> str:
        nodes = self._nodes
        name, owner = self._claim_of(node, current)
        if owner is None:
            return f"NodeClaim {name} is already gone: Karpenter is replacing {node}"
        if meta(owner).get("deletionTimestamp"):
            return f"NodeClaim {name} is already being deleted: Karpenter is replacing {node}"
        if not nodes.sends(node, f"delete NodeClaim {name}"):
            return f"dry run: would delete NodeClaim {name}"
        nodes.event(node, EventReason.REPLACED, f"deleted NodeClaim {name}: Karpenter replaces it")
        # This claim only (its uid): one Karpenter made since under the same name is not ours.
        this_one = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=meta(owner)["uid"]))
        try:
            with api_errors("delete", NODECLAIM_RESOURCE):
                self._custom.delete_cluster_custom_object(*NODECLAIMS, name, body=this_one)
        except (NodeGone, Conflict):  # Karpenter got there between the read and the delete
            return f"NodeClaim {name} is already gone: Karpenter is replacing {node}"
        return f"deleted Karpenter NodeClaim {name}; Karpenter provisions a replacement"

    def _claim_of(self, node: str, current: Json) -> tuple[str, Json | None]:
        """The node's NodeClaim (its name, and the object or None if it is gone). Karpenter
        makes the NodeClaim the node's owner when the node registers: one GET by that name.
        Without that reference, the claim whose providerID is the node's (one paginated list;
        by node name only if the node has no providerID)."""
        owned = claim_name(current)
        if owned:
            try:
                with api_errors("get", NODECLAIM_RESOURCE):
                    return owned, cast(
                        Json, self._custom.get_cluster_custom_object(*NODECLAIMS, owned)
                    )
            except NodeGone:
                next(self._claims(limit=1), None)  # refuses if the collection is missing
                return owned, None
        provider = current.get("spec", {}).get("providerID")
        key, want = ("providerID", provider) if provider else ("nodeName", node)
        for claim in self._claims():
            if claim.get("status", {}).get(key) == want:
                return meta(claim)["name"], claim
        raise ActionRefused(f"no Karpenter NodeClaim owns {node}: refusing to guess")

    def _claims(self, limit: int = PAGE) -> Iterator[Json]:
        """Every NodeClaim, a page at a time. A 404 on the collection is not a gone node: the
        cluster has no NodeClaims at all."""
        try:
            yield from list_pages(
                self._custom.list_cluster_custom_object,
                *NODECLAIMS,
                what=NODECLAIM_RESOURCE,
                limit=limit,
            )
        except NodeGone as exc:
            raise ActionRefused(
                "Karpenter's NodeClaim CRD is not installed (karpenter.sh/v1 nodeclaims not "
                "served): set the replace provider to one this cluster has"
            ) from exc


class DeleteNodeReplacer:
    """Delete the Node object; an external provisioner brings a new one."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def replace_node(self, node: str, current: Json) -> str:
        nodes = self._nodes
        if not nodes.sends(node, "delete the Node object"):
            return f"dry run: would delete node {node}"
        # The event goes first: it is the record left for external provisioning.
        nodes.event(node, EventReason.REPLACED, "deleted the Node object for replacement")
        uid = meta(current).get("uid")
        with api_errors("delete", f"nodes/{node}"):  # this object only, not one that replaced it
            nodes.core.delete_node(
                node, body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid))
            )
        return f"deleted node {node}; the provisioner replaces it"


class RefusingReplacer:
    """Never replace: a replace rung fails visibly instead of guessing."""

    def __init__(self, nodes: NodeApi) -> None:
        pass

    def replace_node(self, node: str, current: Json) -> str:
        raise _cannot_tell(node)


class AutoReplacer:
    """Karpenter's way for a node carrying its nodepool label; any other node is refused."""

    def __init__(self, nodes: NodeApi) -> None:
        self._karpenter = KarpenterReplacer(nodes)

    def replace_node(self, node: str, current: Json) -> str:
        if KARPENTER_POOL_LABEL in meta(current).get("labels", {}):
            return self._karpenter.replace_node(node, current)
        raise _cannot_tell(node)


class OncePerNode:
    """A replacement happens once per node object. The ladder names the object it saw (its
    uid); when that one is gone, or another object stands under the name, the replacement
    already happened — a retry after a lost answer says so and changes nothing."""

    def __init__(self, nodes: NodeApi, way: ReplaceWay) -> None:
        self._nodes, self._way = nodes, way

    def replace(self, node: str, node_uid: str = "") -> str:
        try:
            current = self._nodes.node(node)
        except NodeGone:
            if node_uid:
                return f"{node} is gone: already replaced"
            raise
        now = meta(current).get("uid")
        if node_uid and now != node_uid:
            return f"{node} is another node object now (uid {now}): already replaced"
        self._nodes.managed(current)
        return self._way.replace_node(node, current)


def _cannot_tell(node: str) -> ActionRefused:
    return ActionRefused(
        f"cannot tell how this cluster provisions {node}: it is not a "
        "Karpenter node; set the replace provider to 'plain' to delete "
        "the Node object and let your provisioner bring a new one"
    )


class ReplaceWay(Protocol):
    """One way of getting new hardware, given the node as read (checked to be the object the
    ladder saw, and managed by remedy)."""

    def replace_node(self, node: str, current: Json) -> str: ...


ReplacerFactory = Callable[[NodeApi], ReplaceWay]
# The --replace-provider values: the one place a new way of replacing nodes is registered.
REPLACERS: dict[str, ReplacerFactory] = {
    "auto": AutoReplacer,
    "karpenter": KarpenterReplacer,
    "plain": DeleteNodeReplacer,
    "none": RefusingReplacer,
}


def replacer_named(name: str, nodes: NodeApi) -> Replacer:
    try:
        factory = REPLACERS[name]
    except KeyError:
        known = ", ".join(REPLACERS)
        raise ValueError(f"unknown replace provider {name!r} (known: {known})") from None
    return OncePerNode(nodes, factory(nodes))
