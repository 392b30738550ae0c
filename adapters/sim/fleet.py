"""The simulated fleet: nodes with GPUs and pods, injectable faults, and the seams over it —
a ``Cluster`` (what the API server would do, ``cluster.py``) and a ``NodeHost`` per node (what
the agent does, ``host.py``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from adapters.sim.cluster import sim_cluster
from adapters.sim.faults import FAULTS
from adapters.sim.host import SimHost
from adapters.sim.layouts import LAYOUTS
from adapters.sim.node import ActiveFault, SimNode
from adapters.sim.state import Held, SimState, utcnow
from remedy.acting.capabilities import Dependency
from remedy.core.errors import RemedyError, TransientError
from remedy.core.models import Finding
from remedy.scan.cluster import Cluster


class SimFleet(SimState):
    """The simulated fleet (``SimState``), with faults to inject and the seams over it."""

    def __init__(
        self,
        nodes: int = 16,
        gpus_per_node: int = 8,
        pool: str = "default",
        clock: Callable[[], datetime] = utcnow,
        seed: int = 0,
        speedup: float = 1.0,
        name_prefix: str = "gpu-node",
        check_timeout_s: float = 5.0,
    ) -> None:
        super().__init__(gpus_per_node, clock, speedup, check_timeout_s)
        self._rng = random.Random(seed)
        for i in range(nodes):
            name = f"{name_prefix}-{i:03d}"
            self.nodes[name] = self.provision(name, pool, generation=0)

    # -- building and injecting ------------------------------------------------------------
    def join(self, name: str, pool: str | None = None) -> SimNode:
        """A new node registers, carrying the admission taint."""
        with self.lock:
            pool = pool or next(iter(self.nodes.values())).pool
            node = self.provision(name, pool, generation=0)
            node.awaiting_admission = True
            self.nodes[name] = node
            return node

    def inject(self, node: str, kind: str, gpu: int = 0, slowdown: float | None = None) -> Finding:
        """Put a fault on a GPU and return the finding the node agent would report (a slow
        node's: the one its job's guard would make); ``slowdown`` a slow node's own (0.05–0.5)."""
        if kind not in FAULTS:
            raise KeyError(f"unknown fault kind {kind!r}; known: {', '.join(FAULTS)}")
        with self.lock:
            sim = self.node(node)
            now = self.clock()
            spec = FAULTS[kind]
            lasts = spec.lasts / self.speedup if spec.lasts else spec.lasts
            slow = (slowdown if slowdown is not None else spec.slow.slowdown) if spec.slow else 0.0
            if spec.slow and not 0 < slow <= 1:
                raise ValueError(f"slowdown {slowdown} of {kind}: not in (0, 1]")
            sim.faults.append(
                ActiveFault(kind=kind, gpu=gpu, since=now, lasts=lasts, slowdown=slow)
            )
            if spec.xid is not None:
                sim.push_xid(gpu, spec.xid)  # what the driver raises through NVML events
            return spec.report(node, gpu, sim.gpus[gpu].serial, now)

    def log_kernel(self, node: str, *lines: str) -> None:
        """The driver prints ``lines`` to the node's kernel log (from then on its probe reads
        that log): for the parser's real line formats, where ``inject`` reports a finding."""
        with self.lock:
            sim = self.node(node)
            sim.kernel_log = [*(sim.kernel_log or []), *lines]

    def inject_random(
        self, weights: dict[str, float] | None = None, nodes: list[str] | None = None
    ) -> Finding:
        """A seeded random fault on a random GPU; ``weights`` maps fault kinds to odds, ``nodes``
        the nodes it may hit (default: all)."""
        weights = weights or dict.fromkeys(sorted(FAULTS), 1.0)
        with self.lock:
            node = self._rng.choice(sorted(self.nodes if nodes is None else nodes))
            kind = self._rng.choices(list(weights), weights=list(weights.values()))[0]
            return self.inject(node, kind, self._rng.randrange(self.gpus_per_node))

    def idle(self, node: str) -> None:
        """The node's job ends: nothing runs on its GPUs (the active checks take it first)."""
        with self.lock:
            sim = self.node(node)
            sim.pods = [p for p in sim.pods if not p.uses_gpus]

    def place(self, node: str, layout: str) -> None:
        """Replace the node's GPU work with a layout of adapters/sim/layouts.py: ``shared``
        (eight one-GPU inference pods), ``mig`` (MIG instances), ``dra`` (DRA claims)."""
        with self.lock:
            sim = self.node(node)
            sim.pods = [p for p in sim.pods if not p.uses_gpus] + LAYOUTS[layout](sim)

    def clear_faults(self, node: str) -> None:
        with self.lock:
            self.node(node).faults.clear()

    def break_nvml(self, node: str, how: str | None) -> None:
        """``missing`` library, ``driver`` not loaded, ``hang`` forever, or None to mend."""
        with self.lock:
            self.node(node).nvml_broken = how

    def lack(self, node: str, dependency: Dependency, why: str) -> None:
        """The node's agent lacks ``dependency`` (remedy/acting/capabilities.py): what it enables,
        the
        node cannot do (a reset with no --allow-reset, say). Every node has everything at first."""
        with self.lock:
            self.node(node).missing[dependency] = why

    def silence_agent(self, node: str, since: datetime | None = None) -> None:
        """The node's agent goes silent (wedged, crash-looping) ``since`` then: no heartbeat,
        and nothing it serves answers. ``revive_agent`` (or a reboot) brings it back."""
        with self.lock:
            self.node(node).agent_silent_since = since or self.clock()

    def revive_agent(self, node: str) -> None:
        with self.lock:
            self.node(node).agent_silent_since = None

    def set_clock(self, node: str, offset: timedelta) -> None:
        """The node's clock runs ``offset`` from the fleet's (negative: behind): its agent's
        heartbeat is written on it."""
        with self.lock:
            self.node(node).clock_offset = offset

    def cordon_by_hand(self, node: str) -> None:
        """An operator or another tool cordons the node (no remedy annotation)."""
        with self.lock:
            self.node(node).unschedulable = True

    def break_action(self, action: str, error: RemedyError) -> None:
        """Make every later ``action`` raise ``error``, as a flaky API or host would."""
        self.broken[action] = error

    def fail_next(self, action: str, error: RemedyError, times: int) -> None:
        """The next ``times`` calls of ``action`` fail before any effect (a flaky API)."""
        self.failing[action] = (error, times)

    def lose_answers(self, action: str, times: int = 1) -> None:
        """The next ``times`` answers of ``action`` are lost after its effect landed: the
        caller sees a transient error (a dropped reply, a process that died) and retries."""
        self.lost_answers[action] = times

    def hold(self, action: str) -> Held:
        """From now on ``action`` (cordon, drain, kill_job, reset_gpu, reboot, or probe) stops
        before its effect until the returned gate is released: what happens while it is under
        way.
        Release it before the workers stop (they wait for their activities)."""
        held = self.holds[action] = Held()
        return held

    def doubled(self) -> list[tuple[str, str, str]]:
        """Keyed effects applied more than once: what exactly-once forbids."""
        keyed = [e for e in self.effects if e[2]]
        return sorted({e for e in keyed if keyed.count(e) > 1})

    def most_out_at_once(self, taken: str) -> int:
        """The most nodes out at once by the cluster's record: ``taken`` (a cordon, a drain)
        and not yet restored."""
        out: set[str] = set()
        most = 0
        for node, action in self.actions:
            if action == taken:
                out.add(node)
            elif action == "restore":
                out.discard(node)
            most = max(most, len(out))
        return most

    # -- what the jobs on it see (adapters/sim/jobs.py) ---------------------------------------
    def gpu_uuids(self, node: str) -> list[str]:
        with self.lock:
            sim = self.nodes.get(node)
            return [g.uuid for g in sim.gpus] if sim else []

    def rank_slowdown(self, node: str, at: datetime) -> dict[int, float]:
        """How much slower the ranks on ``node``'s slow GPUs compute at ``at``, by GPU."""
        with self.lock:
            sim = self.nodes.get(node)
            if sim is None or not any(FAULTS[f.kind].slow for f in sim.faults):
                return {}
            slow = {g.index: sim.slowdown(g.index, at) for g in sim.gpus}
            return {gpu: s for gpu, s in slow.items() if s > 0}

    def placeable(self, node: str) -> bool:
        """A new pod may land there: the node is there and schedulable."""
        with self.lock:
            sim = self.nodes.get(node)
            return sim is not None and not sim.unschedulable

    # -- the seams ---------------------------------------------------------------------------
    @property
    def cluster(self) -> Cluster:
        return sim_cluster(self)

    def host(self, name: str) -> SimHost:
        if self.node(name).agent_silent_since is not None:
            # What a dead agent's queue gives: nothing (a transient error here, retried).
            raise TransientError(f"the agent on {name} does not answer")
        return SimHost(self, name)
