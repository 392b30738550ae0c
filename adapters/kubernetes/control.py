"""Taking a node out of service and back: cordon is ``spec.unschedulable`` plus a NoSchedule
taint, with remedy's ownership recorded in annotations; restore removes only what remedy added
and never touches a cordon someone else set. Drain and kill are in ``drain.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from adapters.kubernetes.drain import Drain
from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.ledger import NodeLedger
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import meta
from remedy.cluster import CordonOwner
from remedy.errors import Conflict, TransientError
from remedy.models import Action, CordonState, NodeBoot
from remedy.once import LedgerEntry, once

CORDONED_BY = f"{PREFIX}/cordoned-by"
CORDON_REASON = f"{PREFIX}/cordon-reason"
CORDONED_AT = f"{PREFIX}/cordoned-at"
TAINT = {"key": f"{PREFIX}/remediating", "value": "true", "effect": "NoSchedule"}
CONFLICT_RETRIES = 5


class KubernetesNodeControl:
    """The NodeControl seam: cordon, restore and boot here, drain and kill by ``Drain``."""

    def __init__(self, nodes: NodeApi, drain: Drain) -> None:
        self._nodes, self._drain = nodes, drain

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        nodes = self._nodes
        for _ in range(CONFLICT_RETRIES):  # 409: someone changed the node; read it again
            current = nodes.node(node)
            nodes.managed(current)
            annotations = meta(current).get("annotations", {})
            spec = current.get("spec", {})
            if spec.get("unschedulable"):
                ours = CORDONED_BY in annotations
                return CordonState.ALREADY_OURS if ours else CordonState.BY_OTHER
            if not nodes.sends(node, f"cordon: {owner.reason}"):
                return CordonState.WOULD_CORDON
            body = {
                "metadata": {
                    "resourceVersion": meta(current).get("resourceVersion"),
                    "annotations": {
                        CORDONED_BY: owner.workflow_id,
                        CORDON_REASON: owner.reason[:256],
                        CORDONED_AT: nodes.clock().isoformat(),
                    },
                },
                "spec": {"unschedulable": True, "taints": [*spec.get("taints", []), TAINT]},
            }
            try:
                with api_errors("patch", f"nodes/{node}"):
                    nodes.core.patch_node(node, body)
            except Conflict:
                continue
            nodes.event(node, "RemedyCordoned", f"cordoned by {owner.workflow_id}: {owner.reason}")
            return CordonState.CORDONED
        raise TransientError(f"node {node} kept changing: {CONFLICT_RETRIES} conflicts")

    def restore(self, node: str) -> bool:
        nodes = self._nodes
        current = nodes.node(node)
        if CORDONED_BY not in meta(current).get("annotations", {}):
            return False  # not remedy's cordon: leave it
        if not nodes.sends(node, "uncordon"):
            return False
        taints = current.get("spec", {}).get("taints", [])
        body = {
            "metadata": {
                "resourceVersion": meta(current).get("resourceVersion"),
                "annotations": {CORDONED_BY: None, CORDON_REASON: None, CORDONED_AT: None},
            },
            "spec": {
                "unschedulable": False,
                "taints": [t for t in taints if t.get("key") != TAINT["key"]],
            },
        }
        with api_errors("patch", f"nodes/{node}"):
            nodes.core.patch_node(node, body)
        nodes.event(node, "RemedyRestored", "uncordoned: the node recovered")
        return True

    def drain(self, node: str, on_progress: Callable[[int], None], key: str) -> str:
        def evict(uids: Sequence[str]) -> str:
            return self._drain.drain(node, on_progress, only=set(uids))

        self._nodes.managed(self._nodes.node(node))
        return self._once(node, key, Action.DRAIN, self._drain.evictable(node), evict)

    def kill_gpu_pods(self, node: str, key: str) -> str:
        def kill(uids: Sequence[str]) -> str:
            return self._drain.kill_gpu_pods(node, only=set(uids))

        self._nodes.managed(self._nodes.node(node))
        return self._once(node, key, Action.KILL_JOB, self._drain.gpu_pods(node), kill)

    def _once(
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
        return NodeBoot(boot_id=boot_id, ready=ready, uid=meta(current).get("uid", ""))
