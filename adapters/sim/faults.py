"""Fault kinds the twin can inject: what NVML shows, what the agent reports, what fixes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from remedy.core.models import Action, Component, ComponentKind, Finding, Severity
from remedy.detection.probe.checks import PCIE, THERMAL, THERMAL_SLOWDOWN, WIDTH_DEGRADED
from remedy.detection.probe.fabric_manager import FABRIC_MANAGER, FABRIC_MANAGER_DOWN
from remedy.detection.probe.load import LOAD, LoadReason
from remedy.detection.probe.nic_check import NIC, PORT_DOWN, RATE_DEGRADED
from remedy.detection.probe.nic_link import LINK_FLAPPING, NIC_LINK
from remedy.detection.probe.nvlink import CRC_RATE, FABRIC_DEGRADED, NVLINK
from remedy.detection.probe.runner import PROBE, TIMED_OUT
from remedy.detection.stragglers.models import SLOW_NODE, STRAGGLERS
from remedy.xid.catalog import load_catalog


class Effect(StrEnum):
    NONE = "none"  # leaves no state behind (an application Xid)
    ECC = "ecc"  # uncorrectable ECC + pending row remap
    LOST = "lost"  # fallen off the bus
    REMAP_FAILURE = "remap_failure"
    THROTTLE = "throttle"  # hardware thermal slowdown
    UNDER_LOAD = "under_load"  # answers queries, fails under load
    PCIE_DEGRADED = "pcie_degraded"  # link trained at x8 instead of x16
    NVLINK_DOWN = "nvlink_down"
    HANG = "hang"  # NVML calls on this GPU never return
    NIC_DOWN = "nic_down"  # an RDMA port not ACTIVE (the fault's index is the NIC's)
    NVLINK_CRC = "nvlink_crc"  # one NVLink's CRC error counter climbing fast
    FABRIC_DEGRADED = "fabric_degraded"  # the fabric's health mask: bandwidth degraded
    FABRIC_MANAGER_DOWN = "fabric_manager_down"  # the node's Fabric Manager service failed
    NIC_NARROW = "nic_narrow"  # an RDMA port trained at 2X: half its peers' rate
    NIC_FLAPPING = "nic_flapping"  # an RDMA link going down and up (link_downed rises)
    # Slower, with no other signal (no Xid, no failed check): only the job's step times show
    # it. SLOW: the GPUs' clocks are held low, which the load test sees; SLOW_HOST: the host
    # starves its ranks (a CPU stuck in powersave, a noisy daemon), which it cannot see.
    SLOW = "slow"
    SLOW_HOST = "slow_host"


NIC_EFFECTS = frozenset({Effect.NIC_DOWN, Effect.NIC_NARROW, Effect.NIC_FLAPPING})


@dataclass(frozen=True)
class Slowness:
    """How a slow-node fault slows its ranks: each step's compute takes ``1 + slowdown`` times
    as long (``inject`` may give its own, 5–50 %), on every GPU of the node or on the fault's
    GPU only, all the time or ``duty`` of each ``period`` (intermittent)."""

    slowdown: float = 0.2
    whole_node: bool = True
    duty: float = 1.0
    period: timedelta = timedelta(minutes=10)

    def on(self, since: datetime, at: datetime) -> bool:
        """Slow at ``at``: an intermittent fault is slow for the first ``duty`` of each period
        from its start."""
        if at < since:
            return False
        if self.duty >= 1:
            return True
        return (at - since) % self.period < self.period * self.duty


@dataclass(frozen=True)
class FaultSpec:
    name: str
    effect: Effect
    fixed_by: frozenset[Action]  # the actions that clear it (from the action table)
    reason: str
    check: str
    severity: Severity = Severity.CRITICAL
    xid: int | None = None
    lasts: timedelta | None = None  # None: until an action clears it
    # Left on a node by a ladder that did not fix it: the mean time in the job until it
    # interrupts the job again (the fleet twin plays a false recovery with it).
    comes_back: timedelta = timedelta(hours=2)
    slow: Slowness | None = None  # a slow node: no agent reports it, its job's guard finds it

    @property
    def passes(self) -> bool:
        """It clears on its own, given time."""
        return self.lasts is not None

    def report(self, node: str, index: int, serial: str, at: datetime) -> Finding:
        """The finding a node agent would send when this fault appears."""
        if self.effect in NIC_EFFECTS:
            component = Component(kind=ComponentKind.NIC, device=f"mlx5_{index}/1")
        elif (self.effect is Effect.FABRIC_MANAGER_DOWN and self.xid is None) or (
            self.slow is not None and self.slow.whole_node
        ):
            component = Component(kind=ComponentKind.NODE)
        else:
            component = Component(kind=ComponentKind.GPU, index=index, serial=serial)
        return Finding(
            node=node,
            check=self.check,
            reason=self.reason,
            severity=self.severity,
            component=component,
            xid=self.xid,
            evidence=f"simulated {self.name}",  # a slow node's: what its job's guard says
            observed_at=at,
            # As the agent's Xid watcher says it: an NVML event has no message to decode.
            nvidia_action=load_catalog().lookup(self.xid).action.value if self.xid else None,
        )


_REPLACE = frozenset({Action.REPLACE})
_REBOOT = frozenset({Action.REBOOT, *_REPLACE})  # a reboot or more
_ALL_HW = frozenset({Action.RESET_GPU, *_REBOOT})  # a reset or more
FAULTS: dict[str, FaultSpec] = {
    f.name: f
    for f in (
        # A reset clears volatile ECC counters and applies the pending remap.
        # The unapplied remap leaves the bad row in use: hours until the job hits it again.
        FaultSpec(
            "ecc_dbe", Effect.ECC, _ALL_HW, "Xid48", "xid", xid=48, comes_back=timedelta(hours=6)
        ),
        # Micro-controller halt: queries fine, dies under load; a reset brings it back.
        FaultSpec(
            "mcu_halt",
            Effect.UNDER_LOAD,
            _ALL_HW,
            "Xid62",
            "xid",
            xid=62,
            comes_back=timedelta(minutes=30),
        ),
        # Only a reboot brings back a GPU that fell off the bus.
        FaultSpec(
            "gpu_lost",
            Effect.LOST,
            _REBOOT,
            "Xid79",
            "xid",
            xid=79,
        ),
        # No spare rows left: only new hardware helps.
        FaultSpec(
            "remap_failure",
            Effect.REMAP_FAILURE,
            _REPLACE,
            "Xid64",
            "xid",
            xid=64,
        ),
        # A short thermal slowdown that passes by itself.
        FaultSpec(
            "thermal_transient",
            Effect.THROTTLE,
            _ALL_HW,
            THERMAL_SLOWDOWN,
            THERMAL.check,
            Severity.WARNING,
            lasts=timedelta(minutes=2),
        ),
        # A graphics exception from the job's own code: nothing wrong with the GPU.
        FaultSpec(
            "app_xid",
            Effect.NONE,
            _ALL_HW,
            "Xid13",
            "xid",
            Severity.WARNING,
            xid=13,
            lasts=timedelta(0),
        ),
        # A link that retrained narrow; a reboot retrains it.
        FaultSpec(
            "pcie_degraded",
            Effect.PCIE_DEGRADED,
            _REBOOT,
            WIDTH_DEGRADED,
            PCIE.check,
            Severity.WARNING,
        ),
        FaultSpec("nvlink_down", Effect.NVLINK_DOWN, _ALL_HW, "Xid74", "xid", xid=74),
        # A marginal NVLink: CRC errors far past DCGM's 100/s; a reset retrains the link and
        # zeroes its counters (a reseat, a replacement, if it comes back).
        FaultSpec(
            "nvlink_crc",
            Effect.NVLINK_CRC,
            _ALL_HW,
            CRC_RATE,
            NVLINK.check,
            Severity.WARNING,
        ),
        FaultSpec(
            "fabric_degraded",
            Effect.FABRIC_DEGRADED,
            _ALL_HW,
            FABRIC_DEGRADED,
            NVLINK.check,
            Severity.WARNING,
        ),
        # Fabric Manager stopped (killed, failed to start): restarting it, or a reboot, brings
        # it back.
        # Xid 45 on its own, Fabric Manager gone with it (NVIDIA's WORKFLOW_XID_45: restart it).
        FaultSpec(
            "fabric_manager_xid45",
            Effect.FABRIC_MANAGER_DOWN,
            frozenset({Action.RESTART_FABRIC_MANAGER, *_REBOOT}),
            "Xid45",
            "xid",
            xid=45,
        ),
        FaultSpec(
            "fabric_manager_down",
            Effect.FABRIC_MANAGER_DOWN,
            frozenset({Action.RESTART_FABRIC_MANAGER, *_REBOOT}),
            FABRIC_MANAGER_DOWN,
            FABRIC_MANAGER.check,
        ),
        # A wedged GPU whose NVML calls hang: the probe must time out and say unhealthy.
        FaultSpec(
            "gpu_hang",
            Effect.HANG,
            _REBOOT,
            TIMED_OUT,
            PROBE.check,
        ),
        # Answers every query and raises no Xid, yet fails under load: only a deep diagnose
        # (admission, a ladder's diagnose rung, the scheduled active checks) finds it.
        FaultSpec(
            "silent_under_load",
            Effect.UNDER_LOAD,
            _ALL_HW,
            LoadReason.FAILS_UNDER_LOAD,
            LOAD.check,
            comes_back=timedelta(minutes=30),
        ),
        FaultSpec(
            "nic_down",
            Effect.NIC_DOWN,
            _REBOOT,
            PORT_DOWN,
            NIC.check,
        ),
        # A port that trained at 2X (a dirty or half-seated cable): up, at half the rate; a
        # reboot retrains the link.
        FaultSpec(
            "nic_degraded",
            Effect.NIC_NARROW,
            _REBOOT,
            RATE_DEGRADED,
            NIC.check,
            Severity.WARNING,
        ),
        # A link going down and up, three times at once and again every ten minutes: it
        # escalates past the flap tolerance; a reboot resets the port (and its counters).
        FaultSpec(
            "nic_flapping",
            Effect.NIC_FLAPPING,
            _REBOOT,
            LINK_FLAPPING,
            NIC_LINK.check,
        ),
        # A slow node: its ranks compute 5–50 % slower and nothing else shows it. The finding is
        # the one its job's guard makes from the ranks' step times (no agent reports it); the
        # ladder's first rung proves it with the load test. GPU clocks held low (a stuck power
        # cap, a clock limit left set): the load test sees them under the reference; a reset
        # clears them.
        FaultSpec(
            "slow_node",
            Effect.SLOW,
            _ALL_HW,
            SLOW_NODE,
            STRAGGLERS.check,
            Severity.WARNING,
            slow=Slowness(),
        ),
        # The host starves its ranks (a CPU governor stuck in powersave, a runaway daemon on
        # the ranks' cores): the GPUs test fast, so the proof passes and the suspicion stays
        # unproven; a reboot clears it.
        FaultSpec(
            "slow_node_hidden",
            Effect.SLOW_HOST,
            _REBOOT,
            SLOW_NODE,
            STRAGGLERS.check,
            Severity.WARNING,
            slow=Slowness(),
        ),
        # Marginal power delivery capping the clocks now and then: slow half of every ten
        # minutes (a load test in the fast half sees nothing); only new hardware holds.
        FaultSpec(
            "slow_node_intermittent",
            Effect.SLOW,
            _REPLACE,
            SLOW_NODE,
            STRAGGLERS.check,
            Severity.WARNING,
            slow=Slowness(duty=0.5),
        ),
        # One GPU's clocks held low: its one rank holds the whole job back.
        FaultSpec(
            "slow_gpu",
            Effect.SLOW,
            _ALL_HW,
            SLOW_NODE,
            STRAGGLERS.check,
            Severity.WARNING,
            slow=Slowness(whole_node=False),
        ),
        # A job wedged on the GPU (Xid 8, the GPU stopped processing its work): the hang ends
        # with the job; the GPU answers queries throughout.
        FaultSpec(
            "job_hang",
            Effect.NONE,
            frozenset({Action.KILL_JOB, *_ALL_HW}),
            "Xid8",
            "xid",
            Severity.WARNING,
            xid=8,
        ),
    )
}
