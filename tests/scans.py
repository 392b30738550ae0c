"""Fleet scans one after another, as the controller runs them: a real Temporal Schedule on the
dev server (the time-skipping server has neither schedules nor the visibility the scan asks),
so each run is given the previous run's result (``workflow.get_last_completion_result``), which
is how the scan carries what it saw from run to run (remedy.scan.liveness)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio.client import Client, ScheduleHandle, WorkflowExecutionStatus, WorkflowHistory

from remedy.scan.fleet import FleetSummary, ScanInput
from workers.schedules import ensure_fleet_scan
from workers.status import scans_started


@asynccontextmanager
async def scan_schedule(
    client: Client, inp: ScanInput, task_queue: str, every: timedelta = timedelta(seconds=1)
) -> AsyncIterator[ScheduleHandle]:
    """A fleet-scan schedule of its own, deleted when the block ends."""
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    await ensure_fleet_scan(client, every, task_queue, inp, schedule_id=schedule_id)
    schedule = client.get_schedule_handle(schedule_id)
    try:
        yield schedule
    finally:
        await schedule.delete()


async def completed_scans(
    client: Client, schedule: ScheduleHandle
) -> list[tuple[FleetSummary, WorkflowHistory]]:
    """The schedule's recent scans that completed, oldest first: what each returned, and its
    history."""
    scans = []
    for run in reversed(scans_started(client, await schedule.describe())):
        if (await run.describe()).status is WorkflowExecutionStatus.COMPLETED:
            scans.append((await run.result(), await run.fetch_history()))
    return scans


async def until(what: str, done: Callable[[], Awaitable[bool]], within_s: float = 60) -> None:
    """Wait (real time: the dev server does not skip) until ``done()`` says so."""
    for _ in range(int(within_s * 10)):
        if await done():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {within_s}s: {what}")
