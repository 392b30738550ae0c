"""The fleet as the scan and the disruption budget see it: every node's facts from a paginated
list of raw JSON (each page reduced to facts before the next is read), and a pool's size from
its ``remedy.io/pool`` label, counted from the nodes' metadata."""

from __future__ import annotations

from datetime import timedelta

from adapters.kubernetes.admission import ADMISSION_REJECTED, ADMISSION_TAINT, VALIDATED_LABEL
from adapters.kubernetes.control import CORDONED_BY
from adapters.kubernetes.listing import count, list_pages
from adapters.kubernetes.marks import remedy_conditions
from adapters.kubernetes.nodes import OPT_OUT_LABEL, PREFIX, NodeApi, has_taint
from adapters.kubernetes.objects import Json, meta
from remedy.budget import CLUSTER_POOL
from remedy.conditions import AGENT_CONDITIONS, GPU_ACTIVE_CHECK, is_problem
from remedy.fleet import NodeFacts

POOL_LABEL = f"{PREFIX}/pool"


class KubernetesFleetView:
    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def pool_size(self, pool: str) -> int:
        """Nodes labelled ``remedy.io/pool=<pool>``; the pool "default" (and the cluster's
        breaker's, ``CLUSTER_POOL``) is the whole cluster."""
        selector = None if pool in ("default", CLUSTER_POOL) else f"{POOL_LABEL}={pool}"
        return count(self._nodes.core.list_node, what="nodes", label_selector=selector)

    def nodes(self) -> list[NodeFacts]:
        return [self._facts(node) for node in list_pages(self._nodes.core.list_node, what="nodes")]

    def _facts(self, node: Json) -> NodeFacts:
        about = meta(node)
        labels, annotations = about.get("labels", {}), about.get("annotations", {})
        spec = node.get("spec", {})
        now = self._nodes.clock()
        conditions = remedy_conditions(node, now)
        # The agent's heartbeat: the newest it wrote on remedy's conditions (remedy.liveness).
        beat = max(
            (c.last_heartbeat_time for c in conditions if c.type in AGENT_CONDITIONS), default=None
        )
        return NodeFacts(
            name=about["name"],
            pool=labels.get(POOL_LABEL, "default"),
            managed=labels.get(OPT_OUT_LABEL) != "false",
            unschedulable=bool(spec.get("unschedulable")),
            cordoned_by_remedy=CORDONED_BY in annotations,
            problems=[c for c in conditions if is_problem(c)],
            active_check=next((c for c in conditions if c.type == GPU_ACTIVE_CHECK), None),
            awaiting_admission=has_taint(node, ADMISSION_TAINT),
            validated=labels.get(VALIDATED_LABEL) == "true",
            rejected=annotations.get(ADMISSION_REJECTED),
            last_heartbeat=beat,
            silent_for=max(now - beat, timedelta(0)) if beat else None,
        )
