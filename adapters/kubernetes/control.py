"""Taking a node out of service and back: cordon is ``spec.unschedulable`` plus a NoSchedule
taint and Karpenter's vetoes (do-not-disrupt, do-not-repair), with remedy's ownership recorded
in annotations; restore
removes only what remedy added and never touches a cordon someone else set. Drain and kill are
in ``drain.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from adapters.kubernetes.drain import Drain
from adapters.kubernetes.edits import (
    as_read,
    has_own_taint,
    patch,
    set_by_others_since,
    with_taint,
    without_taint,
)
from adapters.kubernetes.ledger import NodeLedger
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import Json, meta
from adapters.kubernetes.repairers import on_node
from remedy.core.events import EventReason
from remedy.core.models import Action, CordonState, NodeBoot
from remedy.core.once import LedgerEntry, once
from remedy.scan.cluster import CordonOwner

CORDONED_BY = f"{PREFIX}/cordoned-by"
CORDON_REASON = f"{PREFIX}/cordon-reason"
CORDONED_AT = f"{PREFIX}/cordoned-at"
CORDONED_BY_AGENT = f"{PREFIX}/cordoned-by-agent"  # the node's agent wrote the cordon
TAINT = {"key": f"{PREFIX}/remediating", "value": "true", "effect": "NoSchedule"}
# Karpenter's opt-out of voluntary disruption (consolidation, drift) on a Node or NodeClaim;
# it does not hold off expiry, Karpenter's own repair, or a deletion (remedy's replace).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DO_NOT_DISRUPT_SET = f"{PREFIX}/set-do-not-disrupt"  # remedy set it, so remedy removes it
# Karpenter's veto of its own node repair, independent of do-not-disrupt (alpha, on a Node or
# NodeClaim; karpenter.sh "Well-Known Annotations", designs/node-repair-veto.md): while remedy's
# ladder holds the node, the decision is remedy's. A Karpenter without it ignores it.
DO_NOT_REPAIR = "karpenter.sh/do-not-repair"
DO_NOT_REPAIR_SET = f"{PREFIX}/set-do-not-repair"
VETOES = {DO_NOT_DISRUPT: DO_NOT_DISRUPT_SET, DO_NOT_REPAIR: DO_NOT_REPAIR_SET}


class KubernetesNodeControl:
    """The NodeControl seam: cordon, restore and boot here, drain and kill by ``Drain``."""

    def __init__(self, nodes: NodeApi, drain: Drain) -> None:
        self._nodes, self._drain = nodes, drain

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        return as_read(self._nodes, node, partial(self._cordon, owner))

    def _cordon(self, owner: CordonOwner, current: Json) -> CordonState:
        nodes, node = self._nodes, meta(current)["name"]
        nodes.managed(current)
        nodes.alone(current)  # another repairer's node: not even a cordon
        annotations = meta(current).get("annotations") or {}
        if current.get("spec", {}).get("unschedulable"):
            ours = CORDONED_BY in annotations
            return CordonState.ALREADY_OURS if ours else CordonState.BY_OTHER
        if owner.held():
            return CordonState.HELD_BY_BREAKER
        if not nodes.sends(node, f"cordon: {owner.reason}"):
            return CordonState.WOULD_CORDON
        marks = {
            CORDONED_BY: owner.workflow_id,
            CORDON_REASON: owner.reason[:256],
            CORDONED_AT: nodes.clock().isoformat(),
        }
        if owner.by_agent:
            marks[CORDONED_BY_AGENT] = "true"
        # Karpenter consolidates or replaces a drifted node, cordoned or not, unless it says
        # do-not-disrupt, and repairs it unless it says do-not-repair; someone else's stays
        # theirs (restore removes only what remedy set).
        for veto, set_by_remedy in VETOES.items():
            if veto not in annotations:
                marks |= {veto: "true", set_by_remedy: "true"}
        body = {
            "metadata": {"annotations": marks},
            "spec": {"unschedulable": True, "taints": with_taint(current, TAINT)},
        }
        patch(nodes, current, body)
        nodes.event(node, EventReason.CORDONED, f"cordoned by {owner.workflow_id}: {owner.reason}")
        return CordonState.CORDONED

    def restore(self, node: str) -> bool:
        return as_read(self._nodes, node, self._restore)

    def _restore(self, current: Json) -> bool:
        """Remove remedy's marks; uncordon only if remedy's cordon is intact (``_intact``):
        a cordon that is someone else's now stays, and an Event says why."""
        nodes, node = self._nodes, meta(current)["name"]
        annotations = meta(current).get("annotations") or {}
        if CORDONED_BY not in annotations:
            return False  # not remedy's cordon: leave it
        if not nodes.sends(node, "uncordon"):
            return False
        unschedulable = bool(current.get("spec", {}).get("unschedulable"))
        intact = _intact(current)
        marks: dict[str, str | None] = dict.fromkeys(
            (CORDONED_BY, CORDON_REASON, CORDONED_AT, CORDONED_BY_AGENT)
        )
        for veto, set_by_remedy in VETOES.items():
            if set_by_remedy in annotations:
                marks |= dict.fromkeys((veto, set_by_remedy))
        spec: Json = {"taints": without_taint(current, TAINT)}
        if intact:
            spec["unschedulable"] = False
        patch(nodes, current, {"metadata": {"annotations": marks}, "spec": spec})
        if intact:
            nodes.event(node, EventReason.RESTORED, "uncordoned: the node recovered")
        elif unschedulable:
            nodes.event(
                node,
                EventReason.RESTORED,
                "removed remedy's marks and left the node cordoned: someone else cordoned it "
                "since remedy did",
            )
        else:
            nodes.event(
                node, EventReason.RESTORED, "removed remedy's marks: someone uncordoned the node"
            )
        return intact

    def drain(self, node: str, on_progress: Callable[[int], None], key: str) -> str:
        def evict(uids: Sequence[str]) -> str:
            return self._drain.drain(node, on_progress, only=set(uids))

        self._taking(node)
        return self.keyed(node, key, Action.DRAIN, self._drain.evictable(node), evict)

    def kill_gpu_pods(self, node: str, key: str) -> str:
        def kill(uids: Sequence[str]) -> str:
            return self._drain.kill_gpu_pods(node, only=set(uids))

        self._taking(node)
        return self.keyed(node, key, Action.KILL_JOB, self._drain.gpu_pods(node), kill)

    def _taking(self, node: str) -> None:
        """Before pods are taken off the node: remedy manages it, and nobody else repairs it."""
        current = self._nodes.node(node)
        self._nodes.managed(current)
        self._nodes.alone(current)

    def keyed(
        self,
        node: str,
        key: str,
        action: Action,
        planned: list[str],
        act_on: Callable[[Sequence[str]], str],
    ) -> str:
        """Recorded on the node with the pods it is for (in dry run nothing is written, so
        nothing is recorded). One started and never answered goes on with those pods only:
        a pod scheduled on the node since is not what this action was for."""
        nodes = self._nodes

        def resume(started: LedgerEntry) -> str:
            return act_on(started.targets)

        key = "" if nodes.dry_run else key
        return once(
            NodeLedger(nodes, node),
            key,
            action.value,
            nodes.clock,
            partial(act_on, planned),
            resume,
            targets=planned,
        )

    def node_boot(self, node: str) -> NodeBoot:
        current = self._nodes.node(node)
        status = current.get("status", {})
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        boot_id = status.get("nodeInfo", {}).get("bootID", "")
        return NodeBoot(
            boot_id=boot_id,
            ready=ready,
            uid=meta(current).get("uid", ""),
            other_repairer=on_node(current),  # the Node's own marks: polled, so no other read
        )


def _intact(node: Json) -> bool:
    """remedy's cordon is intact when the node is still unschedulable, still carries remedy's
    taint, and the API server's field tracking does not name another writer of
    ``spec.unschedulable`` since remedy's. ``kubectl cordon`` and ``uncordon`` set only that
    field (remedy's taint outlives an uncordon), so an uncordon and a cordon by someone else
    show only in the field tracking; a cordon without remedy's taint is someone's who took
    the node over. Where the server tracks no fields, an uncordon and a cordon again by
    someone else cannot be told from remedy's own cordon, which is then undone."""
    return (
        bool(node.get("spec", {}).get("unschedulable"))
        and has_own_taint(node, TAINT)
        and not set_by_others_since(node, "spec", "unschedulable")
    )
