"""The fleet scan's Temporal Schedule: created on controller start, updated when it exists."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.client import ScheduleOverlapPolicy as Overlap

from contract.names import FLEET_SCAN_SCHEDULE, fleet_scan_workflow_id
from remedy.fleet import ScanInput
from workflows.fleet_scan import FleetScan


def fleet_scan_schedule(
    every: timedelta, task_queue: str, scan: ScanInput, schedule_id: str = FLEET_SCAN_SCHEDULE
) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            FleetScan.run,
            scan,
            id=fleet_scan_workflow_id(schedule_id),
            task_queue=task_queue,
            execution_timeout=max(every * 5, timedelta(minutes=5)),
            static_summary="fleet scan: reconcile conditions, admit new nodes, summarise",
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        # A scan still running when the next is due: skip the next, never pile scans up.
        policy=SchedulePolicy(overlap=Overlap.SKIP),
        state=ScheduleState(note=f"remedy fleet scan every {every}"),
    )


async def ensure_fleet_scan(
    client: Client,
    every: timedelta,
    task_queue: str,
    scan: ScanInput | None = None,
    schedule_id: str = FLEET_SCAN_SCHEDULE,
) -> None:
    schedule = fleet_scan_schedule(every, task_queue, scan or ScanInput(), schedule_id)
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(replace)
