"""The simulated fleet's state (its nodes, what was done to them, the failures asked for) and
the rules every simulated call follows: the views over it (``cluster.py``, ``host.py``,
``gpu_scope.py``, ``mig.py``) drive it through these public methods, under ``lock``;
``fleet.py``'s ``SimState`` adds the faults to inject and the seams."""

from __future__ import annotations

import threading
import zlib
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

from adapters.sim.fabric import SimFabricJobs
from adapters.sim.identity import agent_signing_key
from adapters.sim.node import SimGpu, SimNode, SimPod
from remedy.core.errors import NodeGone, RemedyError, TransientError
from remedy.core.once import LedgerEntry
from remedy.detection.probe.load import LoadReport
from remedy.disruption.quarantine import BreakerState
from remedy.trust.identity import AGENT_KEY_ANNOTATION
from remedy.trust.signing import public_blob


def _serial(pool: str, node: str, generation: int, gpu: int) -> str:
    # Stable across processes (hash() is salted): the same twin always has the same serials.
    # Like real serials they are unique across the fleet: two pools' gpu-node-000 differ.
    return f"SN{zlib.crc32(f'{pool}/{node}/{generation}/{gpu}'.encode()):010d}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def atomic(started: LedgerEntry) -> str:
    """The ledger's rule for an entry started and never answered (remedy/core/once.py): the sim's
    effect and its record land together, under one lock, so there is none."""
    raise AssertionError(
        f"{started.key}: started and never answered, which the twin cannot do (its effect and "
        "its record land together, under one lock)"
    )


class Held:
    """A gate an action waits at: ``entered`` once one got there, ``release()`` lets all go."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


class SimState:
    """Thread-safe: activities run in a thread pool. A view holds ``lock`` around a read and
    the change it makes."""

    def __init__(
        self,
        gpus_per_node: int = 8,
        clock: Callable[[], datetime] = utcnow,
        speedup: float = 1.0,
        check_timeout_s: float = 5.0,
    ) -> None:
        self.check_timeout_s = check_timeout_s
        self.clock = clock
        self.speedup = speedup  # transient faults pass this much faster (demo time)
        self.gpus_per_node = gpus_per_node
        self.lock = threading.RLock()
        self.nodes: dict[str, SimNode] = {}
        self.actions: list[tuple[str, str]] = []  # (node, action): what was done, in order
        self.effects: list[tuple[str, str, str]] = []  # (node, action, key) of each effect
        self.broken: dict[str, RemedyError] = {}  # action → the error it raises (tests)
        self.lost_answers: dict[str, int] = {}  # action → how many answers to lose after it
        self.failing: dict[str, tuple[RemedyError, int]] = {}  # action → error, times left
        self.serials: list[str] = []  # every GPU serial ever installed, replacements included
        self.holds: dict[str, Held] = {}  # action → a gate it waits at (tests: mid-action)
        self.alerts: list[tuple[str, str, str]] = []  # (node, reason, message) of each alert
        self.breakers: dict[str, BreakerState] = {}  # pool → its breaker as its budget published
        self.fabric = SimFabricJobs(gpus=gpus_per_node)  # what the fabric tests print
        # The load tests run, newest last (node, at, report): what a demo tells of a proof.
        # Called with the node after a drain evicted its pods, outside the lock (the guarded
        # jobs' pods on it fail: adapters/sim/provider.py wires SimJobs.evicted).
        self.drained: list[Callable[[str], object]] = []
        self.load_tests: deque[tuple[str, datetime, LoadReport]] = deque(maxlen=256)

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise NodeGone(f"node {name} not found") from None

    def provision(self, name: str, pool: str, generation: int) -> SimNode:
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
        # Its agent's key, published as the agent does at its start (adapters/sim/identity.py).
        key = public_blob(agent_signing_key(name))
        return SimNode(
            name=name,
            pool=pool,
            gpus=gpus,
            clock=self.clock,
            pods=pods,
            generation=generation,
            annotations={AGENT_KEY_ANNOTATION: key},
        )

    def read_kernel_log(self, node: str) -> list[str]:
        """What the driver printed to the node's kernel log since the last read."""
        with self.lock:
            sim = self.node(node)
            lines = (sim.kernel_log or [])[sim.kernel_log_read :]
            sim.kernel_log_read += len(lines)
            return lines

    def pause_point(self, action: str) -> None:
        """Where ``action`` begins, outside the fleet's lock: wait while it is held."""
        held = self.holds.get(action)
        if held is not None:
            held.entered.set()
            held.released.wait()

    def act(self, node: str, action: str) -> SimNode:
        """The node an action is about to change; raises what break_action() or fail_next()
        asked for."""
        self.call(action)
        return self.node(node)

    def call(self, action: str) -> None:
        """A call of the simulated API is about to be served: fail it if asked to."""
        if action in self.broken:
            raise self.broken[action]
        error, times = self.failing.get(action, (None, 0))
        if error is not None and times > 0:
            self.failing[action] = (error, times - 1)
            raise error

    def answer(self, action: str, detail: str) -> str:
        """What an action says it did, unless its answer is to be lost (the effect stays)."""
        if self.lost_answers.get(action, 0) > 0:
            self.lost_answers[action] -= 1
            raise TransientError(f"{action}: the answer was lost after the effect")
        return detail

    def record(self, node: str, action: str, key: str = "") -> None:
        self.actions.append((node, action))
        self.effects.append((node, action, key))
