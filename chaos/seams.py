"""The seams over the fleet file: the simulator's own cluster and host, each call one
transaction on the file, with the chaos knobs applied around it.

A call reads the fleet, runs the simulator's method on it (same semantics as in memory:
ledgers, ``fail_next``, ``lose_answers``), and writes it back. Around that: the cluster API
down (cluster calls only), a failure before the effect, and, once the transaction is written,
the process killed (a new effect of a ``die_after`` action), a slow answer, or a lost one."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from adapters.sim import SimFleet
from adapters.sim.cluster import SimGpuHandoff
from adapters.sim.host import SimHost
from adapters.sim.nvml import SimNvml
from chaos.store import FleetStore
from remedy.acting.capabilities import DependencyCheck
from remedy.attribution.evidence import RecentXid
from remedy.core.errors import TransientError
from remedy.core.models import Action, CordonState, NodeBoot
from remedy.detection.conditions import NodeCondition
from remedy.detection.gpu import NvmlApi
from remedy.detection.node_facts import NodeFacts
from remedy.detection.probe.load import LoadReport
from remedy.detection.probe.runner import ProbeConfig
from remedy.scan.cluster import Cluster, CordonOwner

T = TypeVar("T")


class StoredCalls:
    def __init__(self, store: FleetStore) -> None:
        self._store = store

    def call(self, action: str, fn: Callable[[SimFleet], T], *, cluster: bool, key: str = "") -> T:
        """``action``: the simulator's name for it (what the knobs and the logs say);
        ``key``: a disruptive action's (remedy/core/once.py)."""
        with self._store.transaction() as world:
            knobs, tally = world.knobs, world.tally
            if cluster and knobs.api_down(datetime.now(UTC)):
                tally.api_refused += 1
                raise TransientError(f"{action}: the cluster API is down (chaos)")
            hit = action in knobs.actions
            if hit and knobs.chance(knobs.fail_before_p):
                tally.failed_before += 1
                raise TransientError(f"{action}: failed before the effect (chaos)")
            before = len(world.fleet.effects)
            result = fn(world.fleet)
            landed = len(world.fleet.effects) > before
            tally.repeats += bool(key and not landed)
            lose = hit and knobs.chance(knobs.lose_answer_p)
            die = landed and action in knobs.die_after
            delay = knobs.answer_delay_s if landed and hit else 0.0
            tally.answers_lost += lose
            tally.deaths += die
            tally.slow_answers += bool(delay)
        # Written: what follows happens to the answer, never to the effect.
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        if delay:
            time.sleep(delay)
        if lose:
            raise TransientError(f"{action}: the answer was lost after the effect (chaos)")
        return result

    def read(self, fn: Callable[[SimFleet], T]) -> T:
        return fn(self._store.read().fleet)


class StoredControl:
    def __init__(self, calls: StoredCalls) -> None:
        self._calls = calls

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        return self._calls.call(
            "cordon", lambda f: f.cluster.control.cordon(node, owner), cluster=True
        )

    def restore(self, node: str) -> bool:
        return self._calls.call("restore", lambda f: f.cluster.control.restore(node), cluster=True)

    def drain(self, node: str, on_progress: Callable[[int], None], key: str = "") -> str:
        return self._calls.call(
            "drain",
            lambda f: f.cluster.control.drain(node, on_progress, key),
            cluster=True,
            key=key,
        )

    def kill_gpu_pods(self, node: str, key: str = "") -> str:
        return self._calls.call(
            "kill_job", lambda f: f.cluster.control.kill_gpu_pods(node, key), cluster=True, key=key
        )

    def node_boot(self, node: str) -> NodeBoot:
        return self._calls.call(
            "node_boot", lambda f: f.cluster.control.node_boot(node), cluster=True
        )


class StoredMarks:
    def __init__(self, calls: StoredCalls) -> None:
        self._calls = calls

    def conditions(self, node: str) -> list[NodeCondition]:
        return self._calls.call(
            "conditions", lambda f: f.cluster.marks.conditions(node), cluster=True
        )

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        self._calls.call(
            "set_conditions",
            lambda f: f.cluster.marks.set_conditions(node, conditions),
            cluster=True,
        )

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        self._calls.call(
            "record_xids", lambda f: f.cluster.marks.record_xids(node, xids), cluster=True
        )

    def xids_since(self, node: str, since: datetime) -> list[RecentXid]:
        return self._calls.call(
            "xids_since", lambda f: f.cluster.marks.xids_since(node, since), cluster=True
        )

    def publish_agent_key(self, node: str, key: str) -> None:
        self._calls.call(
            "publish_agent_key",
            lambda f: f.cluster.marks.publish_agent_key(node, key),
            cluster=True,
        )

    def agent_key(self, node: str) -> str | None:
        return self._calls.call(
            "agent_key", lambda f: f.cluster.marks.agent_key(node), cluster=True
        )

    def person_hold(self, node: str) -> str | None:
        return self._calls.call(
            "person_hold", lambda f: f.cluster.marks.person_hold(node), cluster=True
        )

    def set_person_hold(self, node: str, text: str | None) -> str | None:
        return self._calls.call(
            "set_person_hold",
            lambda f: f.cluster.marks.set_person_hold(node, text),
            cluster=True,
        )


class StoredFleetView:
    def __init__(self, calls: StoredCalls) -> None:
        self._calls = calls

    def nodes(self) -> list[NodeFacts]:
        return self._calls.call("nodes", lambda f: f.cluster.fleet.nodes(), cluster=True)

    def pool_size(self, pool: str) -> int:
        return self._calls.call(
            "pool_size", lambda f: f.cluster.fleet.pool_size(pool), cluster=True
        )

    def pool_gpus(self, pool: str) -> dict[str, int]:
        return self._calls.call(
            "pool_gpus", lambda f: f.cluster.fleet.pool_gpus(pool), cluster=True
        )


class StoredAdmission:
    def __init__(self, calls: StoredCalls) -> None:
        self._calls = calls

    def hold_for_admission(self, node: str) -> None:
        self._calls.call(
            "hold_for_admission",
            lambda f: f.cluster.admission.hold_for_admission(node),
            cluster=True,
        )

    def admit(self, node: str, serials: list[str]) -> None:
        self._calls.call("admit", lambda f: f.cluster.admission.admit(node, serials), cluster=True)

    def reject(self, node: str, reason: str) -> None:
        self._calls.call("reject", lambda f: f.cluster.admission.reject(node, reason), cluster=True)


class StoredReplacer:
    def __init__(self, calls: StoredCalls) -> None:
        self._calls = calls

    def replace(self, node: str, node_uid: str = "") -> str:
        return self._calls.call(
            "replace",
            lambda f: f.cluster.replacer.replace(node, node_uid),
            cluster=True,
            key=node_uid,
        )


def stored_cluster(store: FleetStore) -> Cluster:
    calls = StoredCalls(store)
    return Cluster(
        control=StoredControl(calls),
        marks=StoredMarks(calls),
        fleet=StoredFleetView(calls),
        admission=StoredAdmission(calls),
        gpus=SimGpuHandoff(),
        replacer=StoredReplacer(calls),
    )


class StoredHost:
    """One simulated node's machine (the NodeHost seam). A probe reads the node as it was
    when the probe began (one snapshot for its NVML calls)."""

    def __init__(self, store: FleetStore, name: str) -> None:
        self._calls = StoredCalls(store)
        self.name = name

    def _sim(self, fleet: SimFleet) -> SimHost:
        return fleet.host(self.name)

    @property
    def probe_config(self) -> ProbeConfig:
        return self._calls.read(lambda f: self._sim(f).probe_config)

    def nvml(self) -> NvmlApi:
        return self._calls.read(lambda f: SimNvml(f.node(self.name)))

    def reset_gpus(self, indices: list[int], key: str = "") -> str:
        return self._calls.call(
            "reset_gpu", lambda f: self._sim(f).reset_gpus(indices, key), cluster=False, key=key
        )

    def reboot(self, key: str = "") -> str:
        return self._calls.call(
            "reboot", lambda f: self._sim(f).reboot(key), cluster=False, key=key
        )

    def run_action(self, action: Action, command: list[str], key: str) -> str:
        return self._calls.call(
            action.value,
            lambda f: self._sim(f).run_action(action, command, key),
            cluster=False,
            key=key,
        )

    def load_test(self, indices: list[int]) -> LoadReport:
        return self._calls.read(lambda f: self._sim(f).load_test(indices))

    def dependencies(self, refresh: bool = False) -> list[DependencyCheck]:
        return self._calls.read(lambda f: self._sim(f).dependencies(refresh))
