"""The demo's settings, and what they make: the simulated provider (fleet and jobs), the
runbooks and remedy's policies with their clocks sped up like the runbooks'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from contract.names import (
    CONTROLLER_TASK_QUEUE,
    FLEET_SCAN_SCHEDULE,
    SIM_AGENTS_TASK_QUEUE,
    active_checks_schedule_id,
)
from remedy.attribution.guard import GuardPolicy
from remedy.disruption.budget import BudgetPolicy
from remedy.runbook import RunbookSet, load_runbooks
from remedy.scan.active_checks import ActiveCheckPolicy
from workers.providers.sim import SimFleet, SimProvider, SimSettings

# Odds of each simulated fault, loosely after the Llama 3 interruption table: faulty GPUs and
# HBM dominate, software and transient causes follow.
FAULT_WEIGHTS = {
    "ecc_dbe": 0.25,
    "gpu_lost": 0.2,
    "mcu_halt": 0.15,
    "thermal_transient": 0.15,
    "app_xid": 0.15,
    "remap_failure": 0.1,
    "nvlink_crc": 0.1,  # an NVLink CRC storm: cordoned at once, then drained and reset
    # Llama 3's network switch and cable share (8.4%): a port that trained narrow, a flapping
    # link (adapters/sim/faults.py), each climbing its NIC ladder.
    "nic_degraded": 0.04,
    "nic_flapping": 0.04,
    # A node slower than its peers with no other signal (adapters/sim/faults.py): only its
    # job's step times, or a load test, find it (workers/demo_slow.py).
    "slow_node": 0.03,
}
STATUS_EVERY_S = 5.0
JOB_NODES = 4
# Runbooks for particular pools (inference-gpu-ecc: scope gpu), loaded beside the shipped ones.
EXAMPLE_RUNBOOKS = Path(__file__).resolve().parents[1] / "examples" / "runbooks"
SCAN_EVERY = timedelta(seconds=5)
# The budget's sweep is a safety net (a holder terminated by hand, a node a person restored):
# sped up like the rest it ran every second and filled the budget's history (issue 32).
SWEEP_AT_MOST_EVERY = timedelta(seconds=15)


@dataclass
class DemoConfig:
    nodes: int = 16
    gpus_per_node: int = 8
    fault_every_s: float = 3.0
    speedup: float = 60.0
    duration_s: float | None = None
    seed: int = 1
    runbooks: Path = Path("runbooks")
    # A shared inference pool's runbooks, loaded beside ``runbooks`` for the demo's shared node
    # (eight one-GPU pods; workers/demo_shared.py). None: no shared node.
    shared_runbooks: Path | None = EXAMPLE_RUNBOOKS
    node_prefix: str = "gpu-node"
    pool: str = "default"
    task_queue: str = CONTROLLER_TASK_QUEUE
    agents_task_queue: str = SIM_AGENTS_TASK_QUEUE
    joining_nodes: int = 1  # new nodes that join mid-demo and go through admission
    jobs: int = 2  # guarded lockstep training jobs, 4 nodes each (as many as the fleet holds)
    job_namespace: str = "ml"
    # Active checks, in the demo's wall time (None: off); the last node is idle and carries a
    # fault only load shows, so the first round finds it.
    # The first guarded job runs elastic with one node this much slower (workers/demo_slow.py):
    # its guard must find it in the ranks' step times. None or 0: no slow node.
    slow_node: float | None = 0.25
    active_checks: ActiveCheckPolicy | None = ActiveCheckPolicy(
        every=timedelta(seconds=15),
        interval=timedelta(minutes=1),
        max_age=timedelta(minutes=10),
        lease_wait=timedelta(seconds=30),
    )

    @property
    def scan_schedule(self) -> str:
        """One schedule per controller queue, so two demos on one server stay apart."""
        return self._own(FLEET_SCAN_SCHEDULE)

    @property
    def checks_schedule(self) -> str:
        return self._own(active_checks_schedule_id(self.pool))

    def _own(self, schedule: str) -> str:
        own = self.task_queue == CONTROLLER_TASK_QUEUE
        return schedule if own else f"{schedule}-{self.task_queue}"


def demo_provider(config: DemoConfig) -> SimProvider:
    """The simulated fleet the config describes, before any fault, with its guarded jobs
    (none launched), built through the composition root."""
    return SimProvider(
        SimSettings(
            nodes=config.nodes,
            gpus_per_node=config.gpus_per_node,
            seed=config.seed,
            speedup=config.speedup,
            name_prefix=config.node_prefix,
            pool=config.pool,
        )
    )


@dataclass(frozen=True)
class DemoRunbooks:
    fleet: RunbookSet  # what the fleet's agents match findings with
    shared: RunbookSet | None  # the shared node's agent: the fleet's and its pool's own


def demo_runbooks(config: DemoConfig) -> DemoRunbooks:
    """The runbooks, their tolerances and settle times divided by the speedup; all loaded
    here, so a broken one fails before anything starts."""

    def scaled(paths: list[Path]) -> RunbookSet:
        return RunbookSet(r.scaled(config.speedup) for r in load_runbooks(paths))

    shared = config.shared_runbooks
    return DemoRunbooks(
        fleet=scaled([config.runbooks]),
        shared=scaled([config.runbooks, shared]) if shared is not None else None,
    )


def spare_nodes(config: DemoConfig, fleet: SimFleet) -> list[str]:
    """The nodes no guarded job runs on (jobs take the first ones, JOB_NODES each)."""
    nodes = sorted(fleet.nodes)
    return nodes[min(config.jobs, len(nodes) // JOB_NODES) * JOB_NODES :]


def guard_policy(config: DemoConfig) -> GuardPolicy:
    """The default job guard with its clocks sped up like the runbooks'."""
    default = GuardPolicy()
    fast = config.speedup
    suspicions, stragglers = default.suspicions, default.suspicions.stragglers
    return GuardPolicy(
        gather=default.gather / fast,
        backoff_initial=default.backoff_initial / fast,
        backoff_max=default.backoff_max / fast,
        suspicions=suspicions.model_copy(
            update={
                "expire_after": suspicions.expire_after / fast,
                "quiet": suspicions.quiet / fast,
                "ladder_poll": suspicions.ladder_poll / fast,
                # The sim's ranks print a line a minute of demo time: buckets as fast.
                "stragglers": stragglers.model_copy(
                    update={"bucket": stragglers.bucket / fast, "window": stragglers.window / fast}
                ),
            }
        ),
    )


def budget_policy(config: DemoConfig) -> BudgetPolicy:
    """The default budget with its clocks sped up like the runbooks'."""
    default = BudgetPolicy()
    return default.model_copy(
        update={
            "storm_window": default.storm_window / config.speedup,
            "reclaim_every": max(default.reclaim_every / config.speedup, SWEEP_AT_MOST_EVERY),
        }
    )
