"""A population of jobs on a shared fleet, for job success per policy.

Jobs from one node to hundreds, hours to weeks, each meeting the fleet's faults at the
reference rate per node-day (``twin.generator`` on the job's own nodes and length). A job
fails in one of two ways, the same for every policy:

- **crash loop on a bad node**: a job restarted after a fault lands on the same node while
  that node is still in service (on a full fleet its slot is the free one); each restart dies
  there, and after Kubernetes' backoff (``backoffLimit`` 6 with 10 s doubling, plus each
  attempt's start) the job is failed. So a bad node kept in service ``crash_loop`` or longer
  fails the job; a node cleared while its fault stayed is kept in service for good.
- **restart cap**: more than ``max_restarts`` interruptions over the job's life (remedy's job
  guard stops and holds a job past its cap, 5 by default; torchrun ``--max-restarts`` alike).

What is not modelled: capacity contention between the jobs (each finds its spare), a job's own
bugs that recur (a software bug costs one restart, as in the Llama 3 run), deadlines."""

from __future__ import annotations

import math
import random
from datetime import timedelta

from pydantic import BaseModel, Field

from adapters.sim.faults import FAULTS
from twin.causes import Cause
from twin.generator import FaultEvent, FaultKind, generate
from twin.job import LadderRun, Policy

ZERO = timedelta(0)
CRASH_LOOP, RESTART_CAP = "crash loop on a bad node", "restart cap"


class SizeShare(BaseModel):
    nodes: int = Field(ge=1)
    share: float = Field(gt=0, le=1)


# Most jobs are small and a few are large (Meta's research clusters: most jobs use a node or
# less, and the few 512+ GPU jobs hold most GPU time). The exact shares are a calibration:
# chosen so that manual operations land near the 98 % job success the seed reports before
# automation (docs/benchmarks.md, "Fleet twin"); every policy then runs the same jobs.
DEFAULT_SIZES = [
    SizeShare(nodes=nodes, share=share)
    for nodes, share in (
        (1, 0.754),
        (2, 0.093),
        (4, 0.06),
        (8, 0.038),
        (16, 0.022),
        (32, 0.014),
        (64, 0.009),
        (128, 0.0055),
        (256, 0.0033),
        (512, 0.0011),
    )
]


class PopulationConfig(BaseModel):
    jobs: int = Field(default=10_000, ge=1)
    seed: int = 7
    sizes: list[SizeShare] = Field(default_factory=lambda: list(DEFAULT_SIZES))
    # Lengths are log-uniform between these: as many jobs of hours as of days as of weeks.
    shortest: timedelta = timedelta(hours=1)
    longest: timedelta = timedelta(days=14)
    crash_loop: timedelta = timedelta(minutes=40)
    max_restarts: int = Field(default=5, ge=0)


class Job(BaseModel):
    nodes: int
    length: timedelta
    events: list[FaultEvent]

    @property
    def node_days(self) -> float:
        return self.nodes * self.length / timedelta(days=1)


class PopulationResult(BaseModel):
    policy: str
    jobs: int
    finished: int
    failures: dict[str, int]  # cause → jobs
    interruptions: int

    @property
    def success(self) -> float:
        return self.finished / self.jobs


def sample_jobs(causes: list[Cause], config: PopulationConfig) -> list[Job]:
    """The population, with each job's faults; seeded, the same for every policy."""
    rng = random.Random(config.seed)
    low, high = math.log(config.shortest.total_seconds()), math.log(config.longest.total_seconds())
    jobs = []
    for index in range(config.jobs):
        nodes = rng.choices(config.sizes, weights=[s.share for s in config.sizes])[0].nodes
        length = timedelta(seconds=math.exp(rng.uniform(low, high)))
        events = generate(causes, nodes, length, seed=config.seed * 1_000_003 + index)
        jobs.append(Job(nodes=nodes, length=length, events=events))
    return jobs


def in_service(event: FaultEvent, run: LadderRun, policy: Policy) -> timedelta:
    """How long the bad node stays in service after the fault: where the job's restarts land."""
    spec = FAULTS.get(event.fault or "")
    if spec is None or spec.passes or event.transient:
        return ZERO  # no bad node: the restart succeeds wherever it lands
    if run.false_recovery and not run.takes_node_out:
        return timedelta.max  # cleared with the fault still there: it stays in service
    return policy.detect


def outcome(
    job: Job, ladders: dict[FaultKind, LadderRun], policy: Policy, config: PopulationConfig
) -> tuple[str | None, int]:
    """(why the job failed, None if it finished; its interruptions)."""
    restarts = 0
    for event in job.events:
        run = ladders[event.kind]
        if not (event.interrupts_job or run.disruptive):
            continue
        # A fault left behind on a node taken out comes back: another interruption.
        restarts += 1 + (run.false_recovery and run.takes_node_out)
        if in_service(event, run, policy) >= config.crash_loop:
            return CRASH_LOOP, restarts
        if restarts > config.max_restarts:
            return RESTART_CAP, restarts
    return None, restarts


def job_success(
    jobs: list[Job],
    ladders: dict[FaultKind, LadderRun],
    policy: Policy,
    config: PopulationConfig,
) -> PopulationResult:
    failures: dict[str, int] = {}
    interruptions = 0
    for job in jobs:
        why, restarts = outcome(job, ladders, policy, config)
        interruptions += restarts
        if why:
            failures[why] = failures.get(why, 0) + 1
    return PopulationResult(
        policy=policy.name,
        jobs=len(jobs),
        finished=len(jobs) - sum(failures.values()),
        failures=failures,
        interruptions=interruptions,
    )
