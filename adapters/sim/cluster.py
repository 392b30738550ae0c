"""The cluster seams over the twin, with Kubernetes' semantics for cordon ownership: one small
class per seam, as on Kubernetes, so a test can swap any one of them (a replacer, say)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from adapters.sim import layouts
from adapters.sim.gpu_scope import SimGpuScope
from adapters.sim.mig import SimMigLayouts, mig_manager_starts
from adapters.sim.state import SimState, atomic
from remedy.acting.gpu_use import NodeGpuUse
from remedy.attribution.evidence import RecentXid, remember
from remedy.core.errors import ActionRefused
from remedy.core.models import Action, CordonState, NodeBoot
from remedy.core.once import once
from remedy.detection.conditions import GPU_ACTIVE_CHECK, NodeCondition, is_problem
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import CLUSTER_POOL
from remedy.disruption.quarantine import BreakerState
from remedy.scan.cluster import Cluster, CordonOwner
from remedy.trust.identity import AGENT_KEY_ANNOTATION
from remedy.trust.person_hold import HOLD_ANNOTATION

if TYPE_CHECKING:
    from adapters.sim.node import SimNode

REMEDY_CORDON = "remedy.io/cordoned-by"
AGENT_CORDON_AT = "remedy.io/cordoned-by-agent-at"  # when the node's agent wrote remedy's cordon


class SimNodeControl:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        self._fleet.pause_point("cordon")
        with self._fleet.lock:
            sim = self._fleet.act(node, "cordon")
            if sim.unschedulable:
                ours = REMEDY_CORDON in sim.annotations
                return CordonState.ALREADY_OURS if ours else CordonState.BY_OTHER
            if owner.held():
                return CordonState.HELD_BY_BREAKER
            sim.unschedulable = True
            sim.annotations[REMEDY_CORDON] = f"{owner.workflow_id}: {owner.reason}"
            if owner.by_agent:
                sim.annotations[AGENT_CORDON_AT] = self._fleet.clock().isoformat()
            self._fleet.record(node, "cordon")
            return CordonState.CORDONED

    def restore(self, node: str) -> bool:
        with self._fleet.lock:
            sim = self._fleet.act(node, "restore")
            if REMEDY_CORDON not in sim.annotations:
                return False
            del sim.annotations[REMEDY_CORDON]
            sim.annotations.pop(AGENT_CORDON_AT, None)
            sim.unschedulable = False
            self._fleet.record(node, "restore")
            return True

    def drain(self, node: str, on_progress: Callable[[int], None], key: str) -> str:
        def evict() -> str:
            evicted = [p for p in sim.pods if not p.daemonset]
            sim.pods = [p for p in sim.pods if p.daemonset]
            self._fleet.record(node, "drain", key)
            return f"evicted {len(evicted)} pods, left {len(sim.pods)} DaemonSet/mirror pods"

        # What is left to evict, told as the drain begins (a real drain's first heartbeat), and
        # not again after the effect: a heartbeat then could bring an abort's cancel back and
        # raise in the activity's thread between its effect and its answer.
        with self._fleet.lock:
            there = self._fleet.nodes.get(node)
            on_progress(sum(1 for p in there.pods if not p.daemonset) if there else 0)
        self._fleet.pause_point("drain")
        with self._fleet.lock:
            sim = self._fleet.act(node, "drain")  # a failure before the effect records nothing
            # The effect and its record land together: under one lock, on one node.
            done = once(sim, key, Action.DRAIN, self._fleet.clock, evict, atomic)
        for evicted in self._fleet.drained:  # the jobs' pods it evicted fail (outside the lock)
            evicted(node)
        return self._fleet.answer("drain", done)

    def kill_gpu_pods(self, node: str, key: str) -> str:
        def kill() -> str:
            killed = [p for p in sim.pods if p.uses_gpus]
            sim.pods = [p for p in sim.pods if not p.uses_gpus]
            sim.clear(Action.KILL_JOB)  # a hung job's hang goes with it
            self._fleet.record(node, "kill_job", key)
            return f"deleted {len(killed)} pods using the node's GPUs"

        self._fleet.pause_point("kill_job")
        with self._fleet.lock:
            sim = self._fleet.act(node, "kill_job")
            done = once(sim, key, Action.KILL_JOB, self._fleet.clock, kill, atomic)
            return self._fleet.answer("kill_job", done)

    def node_boot(self, node: str) -> NodeBoot:
        with self._fleet.lock:
            sim = self._fleet.node(node)
            return NodeBoot(boot_id=sim.boot, ready=True, uid=sim.uid)


class SimNodeMarks:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def conditions(self, node: str) -> list[NodeCondition]:
        with self._fleet.lock:
            return list(self._fleet.node(node).conditions.values())

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        with self._fleet.lock:
            self._fleet.node(node).conditions.update({c.type: c for c in conditions})

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        with self._fleet.lock:
            sim = self._fleet.node(node)
            sim.recent_xids = remember(sim.recent_xids, xids, self._fleet.clock())

    def xids_since(self, node: str, since: datetime) -> list[RecentXid]:
        with self._fleet.lock:
            return self._fleet.node(node).xids_since(since)

    def publish_agent_key(self, node: str, key: str) -> None:
        with self._fleet.lock:
            self._fleet.node(node).annotations[AGENT_KEY_ANNOTATION] = key

    def agent_key(self, node: str) -> str | None:
        with self._fleet.lock:
            sim = self._fleet.nodes.get(node)
            return sim.annotations.get(AGENT_KEY_ANNOTATION) if sim is not None else None

    def person_hold(self, node: str) -> str | None:
        with self._fleet.lock:
            return self._fleet.node(node).annotations.get(HOLD_ANNOTATION)

    def set_person_hold(self, node: str, text: str | None) -> str | None:
        with self._fleet.lock:
            marks = self._fleet.node(node).annotations
            before = marks.pop(HOLD_ANNOTATION, None)
            if text is not None:
                marks[HOLD_ANNOTATION] = text
            return before


class SimFleetView:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def nodes(self) -> list[NodeFacts]:
        with self._fleet.lock:
            now = self._fleet.clock()
            return [_facts(n, now) for n in self._fleet.nodes.values()]

    def pool_size(self, pool: str) -> int:
        with self._fleet.lock:
            self._fleet.call("pool_size")
            return sum(1 for n in self._fleet.nodes.values() if pool in (n.pool, CLUSTER_POOL))

    def pool_gpus(self, pool: str) -> dict[str, int]:
        with self._fleet.lock:
            self._fleet.call("pool_gpus")
            nodes = self._fleet.nodes.values()
            return {n.name: len(n.gpus) for n in nodes if pool in (n.pool, CLUSTER_POOL)}


class SimWorkload:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def gpu_pods(self, node: str) -> list[str]:
        return list(dict.fromkeys(u.pod for u in self.gpu_use(node).uses))

    def gpu_use(self, node: str) -> NodeGpuUse:
        with self._fleet.lock:
            self._fleet.call("gpu_pods")
            return layouts.gpu_use(self._fleet.node(node))


class SimAdmission:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def hold_for_admission(self, node: str) -> None:
        with self._fleet.lock:
            sim = self._fleet.act(node, "hold_for_admission")
            if not sim.managed:
                raise ActionRefused(f"node {node} opted out of remedy")
            sim.awaiting_admission = True

    def admit(self, node: str, serials: list[str]) -> None:
        with self._fleet.lock:
            sim = self._fleet.act(node, "admit")
            sim.awaiting_admission, sim.validated_serials, sim.rejected = False, serials, None
            self._fleet.record(node, "admit")

    def reject(self, node: str, reason: str) -> None:
        with self._fleet.lock:
            self._fleet.act(node, "reject").rejected = reason
            self._fleet.record(node, "reject")


class SimGpuHandoff:
    """The twin's GPU operands never hold the GPU: nothing to stop. Their return restarts the
    MIG manager, which applies the node's MIG layout (``fleet``: of that twin)."""

    def __init__(self, fleet: SimState | None = None) -> None:
        self._fleet = fleet

    def release_gpus(self, node: str) -> str:
        return "no GPU operator pods on a simulated node"

    def return_gpus(self, node: str) -> None:
        if self._fleet is not None:
            with self._fleet.lock:
                mig_manager_starts(self._fleet.node(node))


class SimReplacer:
    """New hardware at once, under the same name: it must pass admission before work."""

    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def replace(self, node: str, node_uid: str) -> str:
        with self._fleet.lock:
            old = self._fleet.act(node, "replace")
            if node_uid and old.uid != node_uid:  # the one the ladder saw was replaced already
                return f"{node} is another node object now (uid {old.uid}): already replaced"
            new = self._fleet.provision(node, old.pool, old.generation + 1)
            new.awaiting_admission = True  # new hardware: validated before it takes work
            self._fleet.nodes[node] = new
            self._fleet.record(node, "replace", node_uid)
            done = f"{node} replaced: new hardware generation {new.generation}"
            return self._fleet.answer("replace", done)


def _facts(n: SimNode, now: datetime) -> NodeFacts:
    # The twin's agents heartbeat, each on its node's clock, until a test silences one (the
    # scan judges for how long). A live agent rewrites its conditions at every heartbeat, so
    # they carry its newest; a silent one's keep what it last wrote.
    beat = (n.agent_silent_since or now) + n.clock_offset
    problems = [c for c in n.conditions.values() if is_problem(c)]
    if n.agent_silent_since is None:
        problems = [c.model_copy(update={"last_heartbeat_time": beat}) for c in problems]
    return NodeFacts(
        name=n.name,
        pool=n.pool,
        managed=n.managed,
        unschedulable=n.unschedulable,
        cordoned_by_remedy=REMEDY_CORDON in n.annotations,
        agent_cordoned_at=_agent_cordoned_at(n),
        problems=problems,
        awaiting_admission=n.awaiting_admission,
        validated=n.validated_serials is not None,
        rejected=n.rejected,
        active_check=n.conditions.get(GPU_ACTIVE_CHECK),
        last_heartbeat=beat,
        gpus_out=sorted(n.quarantined),
        held_for_person=HOLD_ANNOTATION in n.annotations,
    )


def _agent_cordoned_at(n: SimNode) -> datetime | None:
    at = n.annotations.get(AGENT_CORDON_AT) if REMEDY_CORDON in n.annotations else None
    return datetime.fromisoformat(at) if at else None


class SimBreakerBoard:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def publish(self, pool: str, state: BreakerState) -> None:
        with self._fleet.lock:
            self._fleet.call("publish_breaker")
            self._fleet.breakers[pool] = state

    def holding(self, pools: list[str]) -> list[str]:
        with self._fleet.lock:
            self._fleet.call("breakers")
            known = self._fleet.breakers
            return [p for p in pools if known.get(p, BreakerState.CLOSED) != BreakerState.CLOSED]


class SimAlerts:
    def __init__(self, fleet: SimState) -> None:
        self._fleet = fleet

    def event(self, node: str, reason: str, message: str, warning: bool = False) -> None:
        with self._fleet.lock:
            self._fleet.call("alert")
            self._fleet.alerts.append((node, reason, message))


def sim_cluster(fleet: SimState) -> Cluster:
    return Cluster(
        control=SimNodeControl(fleet),
        marks=SimNodeMarks(fleet),
        fleet=SimFleetView(fleet),
        admission=SimAdmission(fleet),
        gpus=SimGpuHandoff(fleet),
        replacer=SimReplacer(fleet),
        workload=SimWorkload(fleet),
        alerts=SimAlerts(fleet),
        gpu_scope=SimGpuScope(fleet),
        mig=SimMigLayouts(fleet),
        breakers=SimBreakerBoard(fleet),
        fabric=fleet.fabric,  # what each node's fabric tests print (adapters/sim/fabric.py)
    )
