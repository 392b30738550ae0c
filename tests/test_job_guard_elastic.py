"""Elastic restarts on the time-skipping server: a job that declares a size range restarts at
the size capacity allows when spares are short, grows back once capacity returns and it
acknowledged a checkpoint, and a fixed-size job is restarted as it was (its pods wait)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from remedy.attribution.elastic import ElasticRange
from remedy.attribution.guard import GuardPolicy
from tests.test_job_guard import Guard, guarded, hardware_failure
from workflows.job_guard import JobGuard


async def fail_short(
    env: WorkflowEnvironment, fleet: SimFleet, handle: Guard, job: str, jobs: SimJobs, fits: int
) -> None:
    """A job of 4 nodes fails on a bad node, with room left for
    ``fits`` of its pods, and is restarted (past the backoff)."""
    jobs.sizes[job], jobs.fits = 4, fits
    failed = hardware_failure(sorted(fleet.nodes)[0], job, await env.get_current_time())
    await handle.signal(JobGuard.pod_failed, failed)
    await env.sleep(timedelta(minutes=5))


async def test_an_elastic_job_restarts_smaller_when_spares_are_short_and_grows_back(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        jobs.elastic[job] = ElasticRange(min=2, max=4)
        await fail_short(time_env, fleet, handle, job, jobs, fits=3)
        shrunk = list(jobs.started_at)
        jobs.fits = 4  # the node came back (or a spare arrived)
        await time_env.sleep(timedelta(minutes=20))  # too soon: hysteresis
        too_soon = list(jobs.started_at)
        await time_env.sleep(timedelta(minutes=30))
        ledger = await handle.query(JobGuard.ledger)
    assert shrunk == [(job, 3)]
    assert too_soon == [(job, 3)]
    assert jobs.started_at == [(job, 3), (job, 4)]
    assert len(jobs.checkpoints) == 1  # grown at a checkpoint the job acknowledged
    assert [(r.size, r.grow) for r in ledger.resizes] == [(3, False), (4, True)]
    assert ledger.shape is not None and ledger.shape.size == 4
    assert [r for r, _ in jobs.restarts] == [job, job]  # two incarnations: -r1, -r2


async def test_a_job_that_does_not_checkpoint_stays_at_its_size(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        jobs.elastic[job], jobs.acknowledges = ElasticRange(min=2, max=4), False
        await fail_short(time_env, fleet, handle, job, jobs, fits=2)
        jobs.fits = 4
        await time_env.sleep(timedelta(hours=1))
    assert jobs.started_at == [(job, 2)]  # never ended without a checkpoint
    assert jobs.checkpoints  # it was asked


async def test_a_fixed_size_job_restarts_as_it_was_and_waits_for_capacity(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        await fail_short(time_env, fleet, handle, job, jobs, fits=1)
        await time_env.sleep(timedelta(hours=2))
        ledger = await handle.query(JobGuard.ledger)
    assert [r for r, _ in jobs.restarts] == [job]
    assert jobs.started_at == [] and jobs.checkpoints == []  # no size given, never grown
    assert ledger.resizes == []
