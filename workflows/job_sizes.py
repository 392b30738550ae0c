"""The JobGuard's elastic steps: the size a restart runs the job at, and when a job that runs
below its maximum grows back. What to do is decided in ``remedy.attribution.elastic``; here
are the activities and timers around it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import RIDE_OUT

with workflow.unsafe.imports_passed_through():
    from remedy.attribution.elastic import (
        ElasticPolicy,
        JobShape,
        Sizing,
        below_max,
        grow_size,
        restart_size,
    )
    from remedy.attribution.guard import CheckpointRequest, JobLedger, JobRef


async def shape_of(job: JobRef) -> JobShape | None:
    """The job's shape; None when it cannot be read (the restart keeps the size it had)."""
    try:
        return await act.JOB_SHAPE.execute(
            job,
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"size of {job} and the capacity for it",
        )
    except ActivityError as err:
        workflow.logger.warning("shape of %s unknown, restarted as it was: %s", job, err)
        return None


async def size_for_restart(job: JobRef, ledger: JobLedger) -> Sizing | None:
    """An elastic job restarts at the size capacity allows; a fixed one as it was (None)."""
    shape = await shape_of(job)
    if shape is None:
        return None
    ledger.shape = shape
    return restart_size(shape)


def grow_check(ledger: JobLedger, policy: ElasticPolicy) -> timedelta | None:
    """How long to wait for a failure before looking for capacity (None: wait for ever)."""
    return policy.grow_check if below_max(ledger.shape) else None


async def size_to_grow(job: JobRef, ledger: JobLedger, policy: ElasticPolicy) -> Sizing | None:
    """A larger size once capacity returned and the job acknowledged a checkpoint (so the
    restart loses no work); None otherwise, and the next check looks again."""
    shape = await shape_of(job)
    if shape is None:
        return None
    ledger.shape = shape
    since = ledger.restarted_at  # the job has run at its size since (hysteresis)
    sizing = grow_size(shape, workflow.now() - since if since else policy.grow_after, policy)
    if sizing is None:
        return None
    if await checkpointed(job, policy, f"before it grows to {sizing.size}"):
        return sizing
    workflow.logger.info("%s did not checkpoint: it stays at %d", job, shape.size)
    return None


async def checkpointed(job: JobRef, policy: ElasticPolicy, why: str) -> bool:
    """Ask the job to checkpoint and wait for every pod's acknowledgement, at most the
    policy's grace (polled); False when it did not come in time."""
    asked = workflow.now()
    while True:
        answer = await act.CHECKPOINT_JOB.execute(
            CheckpointRequest(job=job, asked_at=asked),
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"ask {job} to checkpoint {why}",
        )
        if answer.done:
            return True
        if workflow.now() - asked >= policy.checkpoint_grace:
            return False
        await workflow.sleep(policy.checkpoint_poll, summary="wait for the job's checkpoint")
