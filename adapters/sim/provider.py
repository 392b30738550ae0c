"""The simulated provider's entry: the settings of a simulated fleet, and the fleet and its
guarded jobs built from them for the composition root (workers/providers). One fleet gives
every seam: the cluster (``fleet.cluster``), each node's host (``fleet.host``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from adapters.sim.fleet import SimFleet
from adapters.sim.jobs import SimJobs
from adapters.sim.ranks import Pace


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SimSettings(BaseModel):
    """A simulated fleet: its nodes ``NAME_PREFIX-000`` ... in one pool, before any fault."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["sim"] = "sim"
    nodes: int = Field(default=16, ge=0)
    gpus_per_node: int = Field(default=8, ge=1)
    pool: str = "default"
    seed: int = 0  # of the fault injector
    speedup: float = Field(default=1.0, ge=1.0)  # transient faults pass this much faster
    name_prefix: str = "gpu-node"
    # The probe's own default (ProbeConfig): the sim's checks run in-process, and on a busy
    # machine a shorter limit times out healthy checks (make test-stress saw it).
    check_timeout_s: float = Field(default=5.0, gt=0)


def sim_fleet(settings: SimSettings, clock: Callable[[], datetime] = _utcnow) -> SimFleet:
    """The fleet the settings describe, on ``clock`` (a rehearsal's moves with its server)."""
    return SimFleet(
        nodes=settings.nodes,
        gpus_per_node=settings.gpus_per_node,
        pool=settings.pool,
        clock=clock,
        seed=settings.seed,
        speedup=settings.speedup,
        name_prefix=settings.name_prefix,
        check_timeout_s=settings.check_timeout_s,
    )


def sim_jobs(settings: SimSettings, fleet: SimFleet) -> SimJobs:
    """The fleet's guarded jobs, none launched yet; its pool's size in GPUs; their ranks' pace
    and placement from the fleet (a slow node slows its ranks, a cordoned one gets no pod)."""
    jobs = SimJobs(clock=fleet.clock)  # the fleet's: a rehearsal's moves with its server
    jobs.pool, jobs.pools = settings.pool, {settings.pool: len(fleet.nodes) * jobs.gpus_per_node}
    jobs.pace = Pace(uuids=fleet.gpu_uuids, slowdown=fleet.rank_slowdown)
    jobs.placeable = fleet.placeable
    fleet.drained.append(jobs.evicted)
    return jobs
