"""The simulated fleet: nodes with GPUs and pods, injectable faults, and the two seams over it —
a ``Cluster`` (what the API server would do) and a ``NodeHost`` per node (what the agent does)."""

from __future__ import annotations

import random
import threading
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from adapters.sim.faults import FAULTS, Effect, Fix
from adapters.sim.nvml import SimNvml
from remedy.attribution.evidence import RecentXid, remember
from remedy.cluster import CordonOwner, DrainResult
from remedy.conditions import NodeCondition
from remedy.errors import ActionFailed, ActionRefused, NodeGone, RemedyError
from remedy.fleet import NodeFacts
from remedy.gpu import NvmlApi
from remedy.models import CordonState, Finding, NodeBoot
from remedy.probe.nics import NicPort
from remedy.probe.runner import ProbeConfig

REMEDY_CORDON = "remedy.io/cordoned-by"


@dataclass
class SimGpu:
    index: int
    serial: str
    uuid: str


@dataclass
class ActiveFault:
    kind: str
    gpu: int
    since: datetime
    lasts: timedelta | None  # None: until something fixes it

    def cleared_by(self, fix: Fix) -> bool:
        return fix in FAULTS[self.kind].fixed_by

    def expired(self, now: datetime) -> bool:
        return self.lasts is not None and now >= self.since + self.lasts


@dataclass
class SimPod:
    name: str
    uses_gpus: bool
    daemonset: bool = False


@dataclass
class SimNode:
    name: str
    pool: str
    gpus: list[SimGpu]
    clock: Callable[[], datetime]
    faults: list[ActiveFault] = field(default_factory=list)
    unschedulable: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    pods: list[SimPod] = field(default_factory=list)
    boot_id: int = 0
    generation: int = 0  # bumps on replacement: new hardware, new serials
    nics: int = 8
    comes_back: bool = True  # False: a reboot that never returns (dead PSU, hung firmware)
    conditions: dict[str, NodeCondition] = field(default_factory=dict)
    recent_xids: list[RecentXid] = field(default_factory=list)  # what the agent kept
    nvml_broken: str | None = None  # "missing" library, "driver" not loaded, or "hang"
    awaiting_admission: bool = False  # the admission taint: new hardware, not validated yet
    validated_serials: list[str] | None = None
    rejected: str | None = None
    managed: bool = True
    _xids: deque[tuple[int, int]] = field(default_factory=deque)
    _xid_ready: threading.Condition = field(default_factory=threading.Condition)

    def push_xid(self, gpu: int, code: int) -> None:
        with self._xid_ready:
            self._xids.append((gpu, code))
            self._xid_ready.notify_all()

    def pop_xid(self, timeout_s: float) -> tuple[int, int] | None:
        """The next Xid event the driver raised, waiting up to ``timeout_s`` (NVML events)."""
        with self._xid_ready:
            if not self._xid_ready.wait_for(lambda: self._xids, timeout_s):
                return None
            return self._xids.popleft()

    def nic_ports(self) -> list[NicPort]:
        down = {f.gpu for f in self.faults if FAULTS[f.kind].effect is Effect.NIC_DOWN}
        return [
            NicPort(
                device=f"mlx5_{i}",
                port=1,
                state="DOWN" if i in down else "ACTIVE",
                phys_state="Polling" if i in down else "LinkUp",
                rate_gbps=400.0,
            )
            for i in range(self.nics)
        ]

    def effects(self, gpu: int) -> set[Effect]:
        now = self.clock()
        return {FAULTS[f.kind].effect for f in self.faults if f.gpu == gpu and not f.expired(now)}

    def clear(self, fix: Fix, gpus: list[int] | None = None) -> int:
        before = len(self.faults)
        self.faults = [
            f for f in self.faults if not (f.cleared_by(fix) and (gpus is None or f.gpu in gpus))
        ]
        return before - len(self.faults)


def _serial(pool: str, node: str, generation: int, gpu: int) -> str:
    # Stable across processes (hash() is salted): the same twin always has the same serials.
    # Like real serials they are unique across the fleet: two pools' gpu-node-000 differ.
    return f"SN{zlib.crc32(f'{pool}/{node}/{generation}/{gpu}'.encode()):010d}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SimFleet:
    """Thread-safe: activities run in a thread pool."""

    def __init__(
        self,
        nodes: int = 16,
        gpus_per_node: int = 8,
        pool: str = "default",
        clock: Callable[[], datetime] = _utcnow,
        seed: int = 0,
        speedup: float = 1.0,
        name_prefix: str = "gpu-node",
        check_timeout_s: float = 2.0,
    ) -> None:
        self.check_timeout_s = check_timeout_s
        self.clock = clock
        self.speedup = speedup  # transient faults pass this much faster (demo time)
        self.gpus_per_node = gpus_per_node
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self.nodes: dict[str, SimNode] = {}
        self.actions: list[tuple[str, str]] = []  # (node, action): what was done, in order
        self.broken: dict[str, RemedyError] = {}  # action → the error it raises (tests)
        self.serials: list[str] = []  # every GPU serial ever installed, replacements included
        for i in range(nodes):
            name = f"{name_prefix}-{i:03d}"
            self.nodes[name] = self._provision(name, pool, generation=0)

    # -- building and injecting ------------------------------------------------------------
    def _provision(self, name: str, pool: str, generation: int) -> SimNode:
        gpus = [
            SimGpu(
                index=g,
                serial=_serial(pool, name, generation, g),
                uuid=f"GPU-{name}-{generation}-{g}",
            )
            for g in range(self.gpus_per_node)
        ]
        self.serials += [g.serial for g in gpus]
        pods = [
            SimPod("nvidia-device-plugin", uses_gpus=False, daemonset=True),
            SimPod("dcgm-exporter", uses_gpus=False, daemonset=True),
            SimPod(f"train-{name}", uses_gpus=True),
        ]
        return SimNode(
            name=name, pool=pool, gpus=gpus, clock=self.clock, pods=pods, generation=generation
        )

    def join(self, name: str, pool: str | None = None) -> SimNode:
        """A new node registers, carrying the admission taint."""
        with self._lock:
            pool = pool or next(iter(self.nodes.values())).pool
            node = self._provision(name, pool, generation=0)
            node.awaiting_admission = True
            self.nodes[name] = node
            return node

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise NodeGone(f"node {name} not found") from None

    def inject(self, node: str, kind: str, gpu: int = 0) -> Finding:
        """Put a fault on a GPU and return the finding the node agent would report."""
        if kind not in FAULTS:
            raise KeyError(f"unknown fault kind {kind!r}; known: {', '.join(FAULTS)}")
        with self._lock:
            sim = self.node(node)
            now = self.clock()
            spec = FAULTS[kind]
            lasts = spec.lasts / self.speedup if spec.lasts else spec.lasts
            sim.faults.append(ActiveFault(kind=kind, gpu=gpu, since=now, lasts=lasts))
            if spec.xid is not None:
                sim.push_xid(gpu, spec.xid)  # what the driver raises through NVML events
            return spec.report(node, gpu, sim.gpus[gpu].serial, now)

    def inject_random(self, weights: dict[str, float] | None = None) -> Finding:
        """A seeded random fault on a random GPU; ``weights`` maps fault kinds to odds."""
        weights = weights or dict.fromkeys(sorted(FAULTS), 1.0)
        with self._lock:
            node = self._rng.choice(sorted(self.nodes))
            kind = self._rng.choices(list(weights), weights=list(weights.values()))[0]
            return self.inject(node, kind, self._rng.randrange(self.gpus_per_node))

    def clear_faults(self, node: str) -> None:
        with self._lock:
            self.node(node).faults.clear()

    def break_nvml(self, node: str, how: str | None) -> None:
        """``missing`` library, ``driver`` not loaded, ``hang`` forever, or None to mend."""
        with self._lock:
            self.node(node).nvml_broken = how

    def cordon_by_hand(self, node: str) -> None:
        """An operator or another tool cordons the node (no remedy annotation)."""
        with self._lock:
            self.node(node).unschedulable = True

    def break_action(self, action: str, error: RemedyError) -> None:
        """Make every later ``action`` raise ``error``, as a flaky API or host would."""
        self.broken[action] = error

    def _act(self, node: str, action: str) -> SimNode:
        """The node an action is about to change; raises what break_action() asked for."""
        if action in self.broken:
            raise self.broken[action]
        return self.node(node)

    def _record(self, node: str, action: str) -> None:
        self.actions.append((node, action))

    # -- the seams ---------------------------------------------------------------------------
    @property
    def cluster(self) -> SimCluster:
        return SimCluster(self)

    def host(self, name: str) -> SimHost:
        self.node(name)
        return SimHost(self, name)


class SimCluster:
    """The Cluster seam over the twin, with Kubernetes' semantics for cordon ownership."""

    def __init__(self, fleet: SimFleet) -> None:
        self._fleet = fleet

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        with self._fleet._lock:
            sim = self._fleet._act(node, "cordon")
            if sim.unschedulable:
                ours = REMEDY_CORDON in sim.annotations
                return CordonState.ALREADY_OURS if ours else CordonState.BY_OTHER
            sim.unschedulable = True
            sim.annotations[REMEDY_CORDON] = f"{owner.workflow_id}: {owner.reason}"
            self._fleet._record(node, "cordon")
            return CordonState.CORDONED

    def restore(self, node: str) -> bool:
        with self._fleet._lock:
            sim = self._fleet._act(node, "restore")
            if REMEDY_CORDON not in sim.annotations:
                return False
            del sim.annotations[REMEDY_CORDON]
            sim.unschedulable = False
            self._fleet._record(node, "restore")
            return True

    def drain(self, node: str, on_progress: Callable[[int], None]) -> DrainResult:
        with self._fleet._lock:
            sim = self._fleet._act(node, "drain")
            evict = [p for p in sim.pods if not p.daemonset]
            sim.pods = [p for p in sim.pods if p.daemonset]
            self._fleet._record(node, "drain")
        on_progress(0)
        return DrainResult(evicted=len(evict), skipped=len(sim.pods))

    def kill_gpu_pods(self, node: str) -> int:
        with self._fleet._lock:
            sim = self._fleet._act(node, "kill_job")
            killed = [p for p in sim.pods if p.uses_gpus]
            sim.pods = [p for p in sim.pods if not p.uses_gpus]
            self._fleet._record(node, "kill_job")
            return len(killed)

    def pool_size(self, pool: str) -> int:
        with self._fleet._lock:
            return sum(1 for n in self._fleet.nodes.values() if n.pool == pool)

    def release_gpus(self, node: str) -> int:
        return 0  # the twin's GPU operands never hold the GPU

    def return_gpus(self, node: str) -> None:
        pass

    def node_boot(self, node: str) -> NodeBoot:
        with self._fleet._lock:
            return NodeBoot(boot_id=f"boot-{self._fleet.node(node).boot_id}", ready=True)

    def nodes(self) -> list[NodeFacts]:
        with self._fleet._lock:
            return [
                NodeFacts(
                    name=n.name,
                    pool=n.pool,
                    managed=n.managed,
                    unschedulable=n.unschedulable,
                    cordoned_by_remedy=REMEDY_CORDON in n.annotations,
                    problems=[c for c in n.conditions.values() if c.status == "True"],
                    awaiting_admission=n.awaiting_admission,
                    validated=n.validated_serials is not None,
                    rejected=n.rejected,
                )
                for n in self._fleet.nodes.values()
            ]

    def hold_for_admission(self, node: str) -> None:
        with self._fleet._lock:
            sim = self._fleet._act(node, "hold_for_admission")
            if not sim.managed:
                raise ActionRefused(f"node {node} opted out of remedy")
            sim.awaiting_admission = True

    def admit(self, node: str, serials: list[str]) -> None:
        with self._fleet._lock:
            sim = self._fleet._act(node, "admit")
            sim.awaiting_admission, sim.validated_serials, sim.rejected = False, serials, None
            self._fleet._record(node, "admit")

    def reject(self, node: str, reason: str) -> None:
        with self._fleet._lock:
            self._fleet._act(node, "reject").rejected = reason
            self._fleet._record(node, "reject")

    def conditions(self, node: str) -> list[NodeCondition]:
        with self._fleet._lock:
            return list(self._fleet.node(node).conditions.values())

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        with self._fleet._lock:
            self._fleet.node(node).conditions.update({c.type: c for c in conditions})

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        with self._fleet._lock:
            sim = self._fleet.node(node)
            sim.recent_xids = remember(sim.recent_xids, xids, self._fleet.clock())

    def replace(self, node: str) -> str:
        with self._fleet._lock:
            old = self._fleet._act(node, "replace")
            new = self._fleet._provision(node, old.pool, old.generation + 1)
            new.awaiting_admission = True  # new hardware: validated before it takes work
            self._fleet.nodes[node] = new
            self._fleet._record(node, "replace")
            return f"{node} replaced: new hardware generation {new.generation}"


class SimHost:
    """The NodeHost seam for one simulated node."""

    def __init__(self, fleet: SimFleet, name: str) -> None:
        self._fleet = fleet
        self.name = name

    @property
    def probe_config(self) -> ProbeConfig:
        return ProbeConfig(
            expected_gpus=self._fleet.gpus_per_node,
            check_timeout_s=self._fleet.check_timeout_s,
            nics=_SimNics(self),
            expected_nics=self._fleet.node(self.name).nics,
            expected_nic_rate_gbps=400.0,
        )

    def nic_ports(self) -> list[NicPort]:
        return self._fleet.node(self.name).nic_ports()

    def nvml(self) -> NvmlApi:
        return SimNvml(self._fleet.node(self.name))

    def reset_gpus(self, indices: list[int]) -> None:
        with self._fleet._lock:
            sim = self._fleet._act(self.name, "reset_gpu")
            targets = indices or [g.index for g in sim.gpus]
            lost = [g for g in targets if Effect.LOST in sim.effects(g)]
            if lost:
                raise ActionFailed(f"GPU {lost[0]} is lost from the bus: a reset cannot reach it")
            if any(p.uses_gpus for p in sim.pods):
                raise ActionFailed("processes still hold the GPU: drain or kill the job first")
            sim.clear(Fix.RESET, targets)
            self._fleet._record(self.name, "reset_gpu")

    def reboot(self) -> None:
        with self._fleet._lock:
            sim = self._fleet._act(self.name, "reboot")
            if not sim.comes_back:
                self._fleet._record(self.name, "reboot")
                return
            sim.clear(Fix.REBOOT)
            sim.boot_id += 1
            sim.pods = [p for p in sim.pods if p.daemonset]
            self._fleet._record(self.name, "reboot")

    def load_test(self, indices: list[int]) -> list[str]:
        with self._fleet._lock:
            sim = self._fleet.node(self.name)
            targets = indices or [g.index for g in sim.gpus]
            return [
                f"GPU {g}: compute error under sustained load"
                for g in targets
                if sim.effects(g)
                & {Effect.UNDER_LOAD, Effect.LOST, Effect.ECC, Effect.REMAP_FAILURE}
            ]


class _SimNics:
    def __init__(self, host: SimHost) -> None:
        self._host = host

    def ports(self) -> list[NicPort]:
        return self._host.nic_ports()
