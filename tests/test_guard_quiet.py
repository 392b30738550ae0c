"""A JobGuard's history stays quiet on the time-skipping server: an hour of a steady job, its
figures measured every 15 s as the fleet scan's job watch does, is a few dozen events (issue 52:
~1,877 in 33 minutes of the demo, a `job_progress` signal every 5 s), and a held guard hears
nothing while it waits for a person."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.job_watch import JobWatchActivities
from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.messages import JOB_PROGRESS
from contract.names import job_guard_workflow_id
from remedy.attribution.goodput import JobGoodput
from remedy.attribution.guard import GuardPhase, GuardPolicy, JobRef
from remedy.attribution.job_report import GoodputWatch, progress_due
from remedy.attribution.model import PodFailure, Termination
from remedy.runbook import RunbookSet
from tests.conftest import Queues, running_workers
from workflows.job_guard import JobGuard

HOUR = timedelta(hours=1)
SCAN = timedelta(seconds=15)
TARGET = 100  # a guard's events in an hour of a steady job


class Clock:
    """The time-skipping server's time, as the job side and the job watch read it."""

    def __init__(self, at: datetime) -> None:
        self.now = at

    def __call__(self) -> datetime:
        return self.now


async def scans(
    env: WorkflowEnvironment,
    watch: JobWatchActivities,
    clock: Clock,
    queues: Queues,
    span: timedelta = HOUR,
) -> None:
    """The job watch's measure, every SCAN over ``span`` of the server's clock."""
    scan = GoodputWatch(
        policy=GuardPolicy(gather=timedelta(0), max_unknown_retries=0),
        controller_task_queue=queues.controller,
        node_task_queue=queues.agents,
    )
    for _ in range(span // SCAN):
        clock.now = await env.get_current_time()
        await watch.job_goodput(scan)
        await env.sleep(SCAN)


async def events_of(client: Client, job: JobRef) -> list[tuple[int, str]]:
    """The guard's events: (type, the signal's name where it is one)."""
    history = await client.get_workflow_handle(
        job_guard_workflow_id(job.namespace, job.name)
    ).fetch_history()
    return [
        (e.event_type, e.workflow_execution_signaled_event_attributes.signal_name)
        for e in history.events
    ]


def progress(events: list[tuple[int, str]]) -> int:
    return sum(
        1
        for kind, name in events
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and name == JOB_PROGRESS.name
    )


async def test_an_hour_of_a_steady_job_is_a_few_dozen_events_in_its_guard(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    clock = Clock(await time_env.get_current_time())
    jobs = SimJobs(clock=clock)  # a checkpoint every 10 s: its figures change at every scan
    job = JobRef(namespace="ml", name=f"steady-{uuid.uuid4().hex[:6]}")
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        jobs.launch(job, sorted(fleet.nodes)[:2])
        watch = JobWatchActivities(time_env.client, jobs, RunbookSet([]), clock=clock)
        await scans(time_env, watch, clock, queues)
        events = await events_of(time_env.client, job)
        ledger = await time_env.client.get_workflow_handle_for(
            JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
        ).query(JobGuard.ledger)
    assert len(events) <= TARGET, f"{len(events)} events, {progress(events)} progress signals"
    # It still hears: at the start, then every 5 minutes at most as checkpoints come.
    assert 4 <= progress(events) <= 13
    assert ledger.goodput is not None and ledger.goodput.at >= clock.now - timedelta(minutes=5)


async def test_a_held_guard_hears_no_progress(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    clock = Clock(await time_env.get_current_time())
    jobs = SimJobs(clock=clock)
    job = JobRef(namespace="ml", name=f"held-{uuid.uuid4().hex[:6]}")
    node = sorted(fleet.nodes)[0]
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        jobs.launch(job, [node])
        watch = JobWatchActivities(time_env.client, jobs, RunbookSet([]), clock=clock)
        await scans(time_env, watch, clock, queues, SCAN)  # its guard started
        guard = time_env.client.get_workflow_handle_for(
            JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
        )
        unknown = PodFailure(  # no evidence either way; no retry of an unknown cause: held
            job=str(job),
            pod=f"{job.name}-worker-0",
            node=node,
            failed_at=await time_env.get_current_time(),
            termination=Termination(exit_code=1, reason="Error"),
        )
        await guard.signal(JobGuard.pod_failed, unknown)
        await time_env.sleep(timedelta(minutes=1))
        phase = (await guard.query(JobGuard.phase)).phase
        before = progress(await events_of(time_env.client, job))
        await scans(time_env, watch, clock, queues)
        after = progress(await events_of(time_env.client, job))
    assert phase is GuardPhase.HELD
    assert after == before


def test_progress_is_due_when_it_changed_but_not_sooner_than_5_minutes_nor_later_than_15() -> None:
    at = datetime(2026, 12, 7, tzinfo=UTC)

    def figures(minutes: float, ratio: float = 0.9, checkpoint: int = 100) -> JobGoodput:
        return JobGoodput(
            job="ml/a",
            at=at + timedelta(minutes=minutes),
            productive_s=ratio * 1000,
            paid_s=1000,
            checkpoint_step=checkpoint,
        )

    last = figures(0)
    assert progress_due(None, last)  # nothing handed yet
    assert not progress_due(last, figures(4, ratio=0.5, checkpoint=200))  # too soon
    assert progress_due(last, figures(5, checkpoint=200))  # a new checkpoint
    assert progress_due(last, figures(5, ratio=0.84))  # moved 6 points
    assert not progress_due(last, figures(14, ratio=0.88))  # steady
    assert progress_due(last, figures(15, ratio=0.88))  # at least every 15 minutes
