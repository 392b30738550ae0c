"""The fleet as the scan and the disruption budget see it: every node's facts from a paginated
list of raw JSON (each page reduced to facts before the next is read), and a pool's size from
its ``remedy.io/pool`` label — counted in that list, or, when no scan listed the nodes lately,
from the nodes' metadata."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from adapters.kubernetes.admission import ADMISSION_REJECTED, ADMISSION_TAINT, VALIDATED_LABEL
from adapters.kubernetes.control import CORDONED_AT, CORDONED_BY, CORDONED_BY_AGENT
from adapters.kubernetes.gpu_scope import gpus_out
from adapters.kubernetes.listing import count, list_pages
from adapters.kubernetes.marks import node_conditions, remedy_conditions
from adapters.kubernetes.nodes import OPT_OUT_LABEL, PREFIX, NodeApi, has_taint
from adapters.kubernetes.objects import Json, meta, node_gpus
from adapters.kubernetes.repairers import on_node
from remedy.detection.conditions import AGENT_CONDITIONS, GPU_ACTIVE_CHECK, is_problem
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import CLUSTER_POOL
from remedy.scan.monitors import MonitorTable
from remedy.trust.person_hold import HOLD_ANNOTATION

POOL_LABEL = f"{PREFIX}/pool"


# How long the pool sizes counted in a list of every node stand in for a count of their own:
# a scan lists the nodes every minute by default, and each ladder it starts asks its pool's size.
SIZES_FOR = timedelta(minutes=2)


@dataclass(frozen=True)
class _Sizes:
    at: datetime
    total: int
    pools: Counter[str]
    gpus: dict[str, tuple[str, int]]  # node → its pool, its GPUs


class KubernetesFleetView:
    """``monitors``: the conditions of other monitors taken as problems (remedy.scan.monitors)."""

    def __init__(
        self, nodes: NodeApi, sizes_for: timedelta = SIZES_FOR, monitors: MonitorTable | None = None
    ) -> None:
        self._nodes, self._sizes_for = nodes, sizes_for
        self._monitors = monitors or MonitorTable()
        # From the last list of every node; replaced whole (activities run in threads).
        self._sizes: _Sizes | None = None

    def pool_size(self, pool: str) -> int:
        """Nodes labelled ``remedy.io/pool=<pool>``; the pool "default" (and the cluster's
        breaker's, ``CLUSTER_POOL``) is the whole cluster. From the last scan's list when it is
        recent (a list per ladder started would read every node again, as many times as a bad
        scan finds faults); else counted afresh."""
        whole = pool in ("default", CLUSTER_POOL)
        sizes = self._sizes
        if sizes is not None and self._nodes.clock() - sizes.at <= self._sizes_for:
            return sizes.total if whole else sizes.pools[pool]
        selector = None if whole else f"{POOL_LABEL}={pool}"
        return count(self._nodes.core.list_node, what="nodes", label_selector=selector)

    def pool_gpus(self, pool: str) -> dict[str, int]:
        """The GPUs of each node of the pool (``node_gpus``), from the last scan's list when it
        is recent, as ``pool_size``."""
        whole = pool in ("default", CLUSTER_POOL)
        sizes = self._sizes
        if sizes is not None and self._nodes.clock() - sizes.at <= self._sizes_for:
            return {n: g for n, (p, g) in sizes.gpus.items() if whole or p == pool}
        selector = None if whole else f"{POOL_LABEL}={pool}"
        nodes = list_pages(self._nodes.core.list_node, what="nodes", label_selector=selector)
        return {meta(node)["name"]: node_gpus(node) for node in nodes}

    def nodes(self) -> list[NodeFacts]:
        at = self._nodes.clock()
        facts, gpus = [], {}
        for node in list_pages(self._nodes.core.list_node, what="nodes"):
            facts.append(self._facts(node))
            gpus[facts[-1].name] = (facts[-1].pool, node_gpus(node))
        self._sizes = _Sizes(at, len(facts), Counter(f.pool for f in facts), gpus)
        return facts

    def _facts(self, node: Json) -> NodeFacts:
        about = meta(node)
        labels, annotations = about.get("labels", {}), about.get("annotations", {})
        spec = node.get("spec", {})
        now = self._nodes.clock()
        conditions = remedy_conditions(node, now)
        others = node_conditions(node, now, self._monitors.types)
        beat = agent_heartbeat(node)
        return NodeFacts(
            name=about["name"],
            pool=labels.get(POOL_LABEL, "default"),
            managed=labels.get(OPT_OUT_LABEL) != "false",
            unschedulable=bool(spec.get("unschedulable")),
            cordoned_by_remedy=CORDONED_BY in annotations,
            agent_cordoned_at=agent_cordoned_at(annotations),
            problems=[c for c in conditions if is_problem(c)] + self._monitors.taken(others),
            active_check=next((c for c in conditions if c.type == GPU_ACTIVE_CHECK), None),
            awaiting_admission=has_taint(node, ADMISSION_TAINT),
            validated=labels.get(VALIDATED_LABEL) == "true",
            rejected=annotations.get(ADMISSION_REJECTED),
            last_heartbeat=beat,  # judged by the scan, on the controller's clock
            gpus_out=sorted(gpus_out(node)),
            held_for_person=HOLD_ANNOTATION in annotations,
            other_repairer=on_node(node),  # the Node's own marks: no read per node
        )


def agent_cordoned_at(annotations: dict[str, str]) -> datetime | None:
    """When the node's agent wrote remedy's cordon; None for a ladder's or a check's cordon,
    or a time nobody can read (left alone: the scan adopts only on evidence)."""
    if CORDONED_BY_AGENT not in annotations:
        return None
    try:
        at = datetime.fromisoformat(annotations.get(CORDONED_AT, ""))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def agent_heartbeat(node: Json) -> datetime | None:
    """The agent's heartbeat: the newest ``lastHeartbeatTime`` on the conditions it writes
    (remedy.scan.liveness). A condition without one gives none: a time standing in for it would
    change with every scan and pass for a live agent."""
    return max(
        (
            datetime.fromisoformat(c["lastHeartbeatTime"])
            for c in node.get("status", {}).get("conditions", [])
            if c.get("type") in AGENT_CONDITIONS and c.get("lastHeartbeatTime")
        ),
        default=None,
    )
