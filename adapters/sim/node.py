"""A simulated node: its GPUs, pods, faults and what the cluster keeps about it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from adapters.sim.dcgm import health_report
from adapters.sim.faults import FAULTS, Effect
from remedy.acting.gpu_use import GpuClaim
from remedy.attribution.evidence import RecentXid
from remedy.core.models import Action
from remedy.core.once import LedgerEntry
from remedy.detection.conditions import NodeCondition
from remedy.detection.probe.dcgm_sources import ExporterReadings
from remedy.detection.probe.nic_counters import FLAPS_TO_ESCALATE, IB_COUNTERS, CounterHistory
from remedy.detection.probe.nics import NicPort, PortCounters
from remedy.detection.probe.rates import CounterWindow
from remedy.detection.probe.services import ServiceState

FLAP_EVERY = timedelta(minutes=10)  # a flapping link goes down again this often


@dataclass
class SimGpu:
    index: int
    serial: str
    uuid: str
    architecture: int = 9  # NVML_DEVICE_ARCH_HOPPER (H100/H200)
    mig: bool = False  # MIG mode enabled
    mig_instances: list[int] = field(default_factory=list)  # its GPU instances' ids (GPU-I)


@dataclass
class ActiveFault:
    kind: str
    gpu: int
    since: datetime
    lasts: timedelta | None  # None: until something fixes it
    slowdown: float = 0.0  # a slow-node fault's own (its spec's unless inject gave one)

    def cleared_by(self, action: Action) -> bool:
        return action in FAULTS[self.kind].fixed_by

    def expired(self, now: datetime) -> bool:
        return self.lasts is not None and now >= self.since + self.lasts


@dataclass
class SimPod:
    name: str
    uses_gpus: bool
    daemonset: bool = False
    gpus: tuple[int, ...] = ()  # which GPUs (empty with uses_gpus: the whole node's)
    via: GpuClaim = GpuClaim.DEVICE_PLUGIN
    mig: str | None = None  # the MIG instance ("GPU-I:nn") when via MIG

    @property
    def gpu(self) -> int | None:
        """The one GPU it uses (None: every GPU of the node, or more than one)."""
        return self.gpus[0] if len(self.gpus) == 1 else None


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
    quarantined: dict[int, str] = field(default_factory=dict)  # GPU → the ladder holding it
    # nvidia.com/mig.config and .state, as the MIG manager keeps them (adapters/sim/mig.py)
    mig_config: str = ""
    mig_state: str = ""
    mig_manager_fails: bool = False
    boot_id: int = 0
    generation: int = 0  # bumps on replacement: new hardware, new serials
    nics: int = 8
    nvswitch: bool = True  # an HGX board: its GPUs join an NVSwitch fabric (Fabric Manager)
    crc_since: dict[int, float] = field(default_factory=dict)  # GPU → its CRC fault's start
    # The NVLink counters' samples the agent keeps across probes (remedy/detection/probe/rates.py).
    nvlink_window: CounterWindow = field(default_factory=lambda: CounterWindow(first_gap_s=0.01))
    comes_back: bool = True  # False: a reboot that never returns (dead PSU, hung firmware)
    conditions: dict[str, NodeCondition] = field(default_factory=dict)
    recent_xids: list[RecentXid] = field(default_factory=list)  # what the agent kept
    nvml_broken: str | None = None  # "missing" library, "driver" not loaded, or "hang"
    missing: dict[str, str] = field(default_factory=dict)  # dependency → why (all there)
    awaiting_admission: bool = False  # the admission taint: new hardware, not validated yet
    validated_serials: list[str] | None = None
    rejected: str | None = None
    managed: bool = True
    agent_silent_since: datetime | None = None  # its agent stopped heartbeating and answering
    clock_offset: timedelta = timedelta(0)  # its own clock minus the fleet's (− behind)
    # Keyed actions as recorded where they land: the machine's own disk for a reset or a
    # reboot, the node object for cluster actions (one book here: the twin is both).
    ledger: dict[str, LedgerEntry] = field(default_factory=dict)
    # The kernel log the agent reads for Xid and SXid lines (None: this node's probe reads
    # none, as before), and how far it has read.
    kernel_log: list[str] | None = None
    kernel_log_read: int = 0
    # The NICs' counter readings the node's agent keeps across probes (rates need two).
    nic_history: CounterHistory = field(default_factory=CounterHistory)
    # dcgm-exporter on the node (False: the agent reads none) and what its Xid gauge holds:
    # each GPU's last Xid, kept after the fault is fixed (a gauge holds its last value); the
    # agent's last reading of it, kept across probes.
    dcgm_exporter: bool = False
    dcgm_health: bool = False  # DCGM's host engine with its health watches set
    exporter_gauge: dict[int, int] = field(default_factory=dict)
    exporter_readings: ExporterReadings = field(default_factory=ExporterReadings)
    _xids: deque[tuple[int, int]] = field(default_factory=deque)
    _xid_ready: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.agent_starts()

    def agent_starts(self) -> None:
        """The node's agent (re)starts: its counter history is new, from a first reading (a
        reboot forgets the flaps before it, as the real agent's memory does)."""
        self.nic_history = CounterHistory()
        self.exporter_readings = ExporterReadings()
        for reading in self.nic_counters():
            self.nic_history.observe(reading, self.clock())

    @property
    def uid(self) -> str:
        """The node object's uid: a replacement under the same name is another object."""
        return f"uid-{self.name}-{self.generation}"

    @property
    def boot(self) -> str:
        return f"boot-{self.boot_id}"

    def claim(self, entry: LedgerEntry) -> LedgerEntry | None:
        recorded = self.ledger.get(entry.key)
        if recorded is None:
            self.ledger[entry.key] = entry
        return recorded

    def record(self, entry: LedgerEntry) -> None:
        self.ledger[entry.key] = entry

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

    def xids_since(self, since: datetime) -> list[RecentXid]:
        """The Xids the agent kept since ``since``, and each Xid fault still on a GPU raised
        again: a GPU whose fault a rung did not fix raises its Xid as soon as work touches it,
        inside any watch window (dated ``since``: the twin's clock is not the workflow's)."""
        now = self.clock()
        recurring = [
            RecentXid(code=code, gpu=self.gpus[f.gpu].serial, at=since)
            for f in self.faults
            if (code := FAULTS[f.kind].xid) is not None
            and not f.expired(now)
            and f.gpu < len(self.gpus)
        ]
        return [*(x for x in self.recent_xids if x.at >= since), *recurring]

    def dcgm_health_report(self) -> str:
        """``dcgmi health -c -j`` on this node (adapters/sim/dcgm.py)."""
        return health_report({gpu.index: self.effects(gpu.index) for gpu in self.gpus})

    def exporter_metrics(self) -> str:
        """dcgm-exporter's Xid gauge as its endpoint prints it (tests/data/dcgm_exporter)."""
        for f in sorted(self.faults, key=lambda f: f.since):
            if (code := FAULTS[f.kind].xid) is not None and f.gpu < len(self.gpus):
                self.exporter_gauge[f.gpu] = code
        lines = [
            "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.",
            "# TYPE DCGM_FI_DEV_XID_ERRORS gauge",
        ]
        for gpu in self.gpus:
            lines.append(
                f'DCGM_FI_DEV_XID_ERRORS{{gpu="{gpu.index}",UUID="{gpu.uuid}",'
                f'device="nvidia{gpu.index}",Hostname="{self.name}"}} '
                f"{self.exporter_gauge.get(gpu.index, 0)}"
            )
        return "\n".join(lines) + "\n"

    def nic_ports(self) -> list[NicPort]:
        down, narrow = self._nics(Effect.NIC_DOWN), self._nics(Effect.NIC_NARROW)
        return [
            NicPort(
                device=f"mlx5_{i}",
                port=1,
                state="DOWN" if i in down else "ACTIVE",
                phys_state="Polling" if i in down else "LinkUp",
                rate_gbps=200.0 if i in narrow else 400.0,
                width=2 if i in narrow else 4,
                link_layer="InfiniBand",
                model="MT4129",  # ConnectX-7
            )
            for i in range(self.nics)
        ]

    def fabric_manager(self) -> ServiceState:
        """nvidia-fabricmanager as systemd would say (a fault on any GPU index stops it)."""
        now = self.clock()
        down = any(
            FAULTS[f.kind].effect is Effect.FABRIC_MANAGER_DOWN and not f.expired(now)
            for f in self.faults
        )
        return (
            ServiceState("loaded", "failed", "failed")
            if down
            else ServiceState("loaded", "active", "running")
        )

    def nic_counters(self) -> list[PortCounters]:
        """Each port's PMA counters: zero, but link_downed on a flapping link (three downs at
        once, another every FLAP_EVERY; 8 bits, saturating); a reboot resets them."""
        flapping, now = self._nics(Effect.NIC_FLAPPING), self.clock()
        readings = []
        for i in range(self.nics):
            values = dict.fromkeys(IB_COUNTERS, 0)
            if i in flapping:
                downs = FLAPS_TO_ESCALATE + int((now - flapping[i]) / FLAP_EVERY)
                values["link_downed"] = min(254, downs)
            readings.append(PortCounters(f"mlx5_{i}", 1, values))
        return readings

    def _nics(self, effect: Effect) -> dict[int, datetime]:
        """The NICs with a fault of ``effect``, with when it began."""
        now = self.clock()
        return {
            f.gpu: f.since
            for f in self.faults
            if FAULTS[f.kind].effect is effect and not f.expired(now)
        }

    def slowdown(self, gpu: int, at: datetime, *, load_test: bool = False) -> float:
        """How much slower GPU ``gpu``'s rank computes at ``at`` (0.2: 20 %), from the slow-node
        faults on it then; ``load_test``: only what a load test on the GPU would see."""
        seen = {Effect.SLOW} if load_test else {Effect.SLOW, Effect.SLOW_HOST}
        slowest = 0.0
        for f in self.faults:
            spec = FAULTS[f.kind]
            slow = spec.slow
            if slow is None or spec.effect not in seen or f.expired(at):
                continue
            if (slow.whole_node or f.gpu == gpu) and slow.on(f.since, at):
                slowest = max(slowest, f.slowdown)
        return slowest

    def effects(self, gpu: int) -> set[Effect]:
        now = self.clock()
        return {FAULTS[f.kind].effect for f in self.faults if f.gpu == gpu and not f.expired(now)}

    def clear(self, action: Action, gpus: list[int] | None = None) -> int:
        before = len(self.faults)
        self.faults = [
            f for f in self.faults if not (f.cleared_by(action) and (gpus is None or f.gpu in gpus))
        ]
        return before - len(self.faults)
