"""remedy's Temporal Schedules, created on controller start and updated when they exist: the
fleet scan, and one round of active checks per pool."""

from __future__ import annotations

import asyncio
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

from contract.names import (
    FLEET_SCAN_SCHEDULE,
    active_checks_schedule_id,
    active_checks_workflow_id,
    fleet_scan_workflow_id,
)
from remedy.core.durations import format_duration
from remedy.scan.active_checks import ActiveCheckPolicy, ActiveChecksInput
from remedy.scan.cluster import FleetView
from remedy.scan.fleet import ScanInput
from workflows.active_checks import ActiveChecks
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
    await _create_or_update(client, schedule_id, schedule)


def active_checks_schedule(inp: ActiveChecksInput, task_queue: str) -> Schedule:
    policy = inp.policy
    return Schedule(
        action=ScheduleActionStartWorkflow(
            ActiveChecks.run,
            inp,
            id=active_checks_workflow_id(inp.pool),
            task_queue=task_queue,
            # Longer than any check can take (lease, drain, diagnose, each retried): a round
            # that is stuck past it must not hold off the next ones (its checks go on).
            execution_timeout=policy.lease_wait
            + 2 * (policy.drain_timeout + policy.diagnose_timeout)
            + timedelta(hours=1),
            static_summary=f"active checks of pool {inp.pool}: deep diagnose idle or stale nodes",
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=policy.every)]),
        # A round still waiting for leases when the next is due: skip the next.
        policy=SchedulePolicy(overlap=Overlap.SKIP),
        state=ScheduleState(
            note=f"remedy active checks of pool {inp.pool}: idle nodes every "
            f"{format_duration(policy.interval)}, busy ones taken out after "
            f"{format_duration(policy.max_age)}"
        ),
    )


async def ensure_active_checks(
    client: Client, inp: ActiveChecksInput, task_queue: str, schedule_id: str | None = None
) -> str:
    """The pool's schedule of active checks; returns its id."""
    schedule_id = schedule_id or active_checks_schedule_id(inp.pool)
    await _create_or_update(client, schedule_id, active_checks_schedule(inp, task_queue))
    return schedule_id


async def ensure_pool_checks(
    client: Client,
    fleet: FleetView,
    default: ActiveCheckPolicy,
    per_pool: dict[str, ActiveCheckPolicy],
    task_queue: str,
) -> list[str]:
    """A schedule of active checks for every pool the cluster has now and every pool named
    (a pool that appears later gets one when the controller next starts); returns the pools."""
    found = await asyncio.to_thread(fleet.nodes)
    pools = sorted({n.pool for n in found} | set(per_pool))
    for pool in pools:
        inp = ActiveChecksInput(pool=pool, policy=per_pool.get(pool, default))
        await ensure_active_checks(client, inp, task_queue)
    return pools


async def _create_or_update(client: Client, schedule_id: str, schedule: Schedule) -> None:
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:

        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await client.get_schedule_handle(schedule_id).update(replace)
