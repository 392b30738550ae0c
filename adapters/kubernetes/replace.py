"""Replacing a node on Kubernetes: one ``Replacer`` per way a cluster gets new hardware, chosen
by name (``remedy controller --replace-provider``) from ``REPLACERS``.

To add one (a cloud's API, say): a class built from the ``NodeApi`` (the node as JSON with its
``spec.providerID``, the opt-out check, Events, dry run) whose ``replace(node)`` does the work
and says what it did, or raises ActionRefused; then one entry in ``REPLACERS``. Nothing else
changes: the replace activity and the workflows see only the ``Replacer`` seam."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from kubernetes import client as k8s

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import Json, meta
from remedy.cluster import Replacer
from remedy.errors import ActionRefused

KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")


class KarpenterReplacer:
    """Delete the NodeClaim that owns the node: Karpenter provisions a replacement."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes, self._custom = nodes, k8s.CustomObjectsApi(nodes.api)

    def replace(self, node: str) -> str:
        self._nodes.managed(self._nodes.node(node))
        return self.delete_nodeclaim(node)

    def delete_nodeclaim(self, node: str) -> str:
        """For a node already read and found managed."""
        nodes = self._nodes
        with api_errors("list", "nodeclaims.karpenter.sh"):
            claims = cast(Json, self._custom.list_cluster_custom_object(*NODECLAIMS))
        owner = next(
            (c for c in claims.get("items", []) if c.get("status", {}).get("nodeName") == node),
            None,
        )
        if owner is None:
            raise ActionRefused(f"no Karpenter NodeClaim owns {node}: refusing to guess")
        name = meta(owner)["name"]
        if nodes.dry_run:
            nodes.event(node, "RemedyDryRun", f"would delete NodeClaim {name}")
            return f"dry run: would delete NodeClaim {name}"
        nodes.event(node, "RemedyReplaced", f"deleted NodeClaim {name}: Karpenter replaces it")
        with api_errors("delete", "nodeclaims.karpenter.sh"):
            self._custom.delete_cluster_custom_object(*NODECLAIMS, name)
        return f"deleted Karpenter NodeClaim {name}; Karpenter provisions a replacement"


class DeleteNodeReplacer:
    """Delete the Node object; an external provisioner brings a new one."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def replace(self, node: str) -> str:
        nodes = self._nodes
        nodes.managed(nodes.node(node))
        if nodes.dry_run:
            nodes.event(node, "RemedyDryRun", "would delete the Node object")
            return f"dry run: would delete node {node}"
        # The event goes first: it is the record left for external provisioning.
        nodes.event(node, "RemedyReplaced", "deleted the Node object for replacement")
        with api_errors("delete", f"nodes/{node}"):
            nodes.core.delete_node(node)
        return f"deleted node {node}; the provisioner replaces it"


class RefusingReplacer:
    """Never replace: a replace rung fails visibly instead of guessing."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def replace(self, node: str) -> str:
        self._nodes.managed(self._nodes.node(node))
        raise _cannot_tell(node)


class AutoReplacer:
    """Karpenter's way for a node carrying its nodepool label; any other node is refused."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes, self._karpenter = nodes, KarpenterReplacer(nodes)

    def replace(self, node: str) -> str:
        current = self._nodes.node(node)
        self._nodes.managed(current)
        if KARPENTER_POOL_LABEL in meta(current).get("labels", {}):
            return self._karpenter.delete_nodeclaim(node)
        raise _cannot_tell(node)


def _cannot_tell(node: str) -> ActionRefused:
    return ActionRefused(
        f"cannot tell how this cluster provisions {node}: it is not a "
        "Karpenter node; set the replace provider to 'plain' to delete "
        "the Node object and let your provisioner bring a new one"
    )


ReplacerFactory = Callable[[NodeApi], Replacer]
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
    return factory(nodes)
