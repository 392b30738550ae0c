"""Another repairer at work on a node: what Karpenter and EKS leave on the objects while they
disrupt, repair or replace one, read so that remedy never acts on a node someone else is
already taking apart (docs/operations.md, "One repairer per node").

The signals, from their sources:

- ``karpenter.sh/disrupted:NoSchedule``: Karpenter's disruption controller (node repair,
  drift, consolidation) taints the node before it pre-spins a replacement, and its termination
  controller taints a node being deleted (kubernetes-sigs/karpenter pkg/apis/v1/taints.go;
  karpenter.sh "Disruption", "Disruption Controller" step 3 and "Termination Controller"). EKS
  Auto Mode runs Karpenter: the same taint.
- ``karpenter.sh/rebooting:NoSchedule``: Karpenter rebooting the node for repair (the alpha
  ``RebootForRepair`` feature, v1.15; the same taints.go), until the node boots with a new id.
- The node's NodeClaim (``karpenter.sh/v1``) with a ``deletionTimestamp``: Karpenter's node
  repair (pkg/controllers/node/health/controller.go ``deleteNodeClaim``), or anyone, deleted
  it; the node is terminated next.
- The Node itself with a ``deletionTimestamp`` (a finalizer such as Karpenter's
  ``karpenter.sh/termination`` holds it while it drains): it is going.

Events (``DisruptionTerminating`` "Disrupting Node: Unhealthy", ``NodeRepairBlocked``) say the
same thing as the taint, expire after an hour and cost a list per node: the taint is read
instead. EKS managed node groups' own repair leaves no documented mark on the Node before it
drains and terminates the instance: hand the decision to remedy there by turning it off
(docs/operations.md).
"""

from __future__ import annotations

from adapters.kubernetes.objects import Json, meta

DISRUPTED_TAINT = "karpenter.sh/disrupted"
REBOOTING_TAINT = "karpenter.sh/rebooting"
KARPENTER_FINALIZER = "karpenter.sh/termination"
NODECLAIM_KIND = "NodeClaim"
KARPENTER_GROUP = "karpenter.sh"
NODECLAIMS = (KARPENTER_GROUP, "v1", "nodeclaims")
NODECLAIM_RESOURCE = "nodeclaims.karpenter.sh"

_TAINTS = {
    DISRUPTED_TAINT: "Karpenter is disrupting the node (taint karpenter.sh/disrupted: node "
    "repair, drift or consolidation, or its termination)",
    REBOOTING_TAINT: "Karpenter is rebooting the node for repair (taint karpenter.sh/rebooting)",
}


def on_node(node: Json) -> str | None:
    """Who is at work on the node, from the Node alone (its taints, its deletion); None: nobody
    that this can see. Cheap: the fleet scan reads it from the list it has."""
    for taint in node.get("spec", {}).get("taints") or []:
        said = _TAINTS.get(taint.get("key", ""))
        if said is not None:
            return said
    about = meta(node)
    since = about.get("deletionTimestamp")
    if since:
        by = " by Karpenter" if KARPENTER_FINALIZER in (about.get("finalizers") or []) else ""
        return f"the node is being deleted{by} (since {since})"
    return None


def claim_name(node: Json) -> str | None:
    """The NodeClaim Karpenter made the node's owner when it registered; None: not Karpenter's."""
    return next(
        (
            ref["name"]
            for ref in meta(node).get("ownerReferences") or []
            if ref.get("kind") == NODECLAIM_KIND
            and ref.get("apiVersion", "").partition("/")[0] == KARPENTER_GROUP
            and ref.get("name")
        ),
        None,
    )


def on_claim(claim: Json) -> str | None:
    """Karpenter's NodeClaim of the node being deleted: its repair (or someone) is replacing it."""
    since = meta(claim).get("deletionTimestamp")
    if not since:
        return None
    return f"Karpenter's NodeClaim {meta(claim).get('name')} is being deleted (since {since})"
