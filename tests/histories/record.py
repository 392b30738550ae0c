"""Record the workflow histories that tests/test_replay.py replays, one set per release.

Run it for each release (its version, pyproject.toml, as the tag), from a checkout of that
release; never re-record to make a failing replay pass.

    .venv/bin/python -m tests.histories.record --tag 0.13.0   # reset_fixes_ecc_0.13.0.json, ...
    .venv/bin/python -m tests.histories.record --tag 0.13.0 --job-guard
    .venv/bin/python -m tests.histories.record --tag 0.13.0 --active-checks
    .venv/bin/python -m tests.histories.record --tag 0.13.0 --fleet-scan

Keep the histories of the supported releases (this one and the one before: docs/operations.md,
"Upgrading"); delete a release's when its support ends.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract import search_attributes
from contract.messages import APPROVE
from contract.names import (
    active_check_workflow_id,
    active_checks_workflow_id,
    budget_workflow_id,
    remediation_workflow_id,
)
from remedy.attribution.guard import GuardPolicy
from remedy.detection.conditions import conditions_from
from remedy.detection.probe import probe_node
from remedy.ladder.remediation import Phase
from remedy.runbook import RunbookSet, load_runbooks
from remedy.scan.active_checks import ActiveChecksInput
from remedy.scan.fleet import ScanInput
from remedy.trust.decisions import ApproveRequest
from tests.conftest import ROOT, running_workers
from tests.ladder import report, wait_for_phase
from tests.scans import completed_scans, scan_schedule, until
from workers.binaries import installed_binary
from workers.client import ensure_search_attributes

HERE = Path(__file__).parent
# Each on its own node: another GPU (serial), so the second does not ask the first's hardware
# record, whose worker is gone by then.
SCENARIOS = {
    "reset_fixes_ecc": ("ecc_dbe", False, "gpu-node-001"),
    "replace_after_approval": ("remap_failure", True, "gpu-node-000"),
}


async def main(tag: str, job_guard: bool, active_checks: bool = False, scan: bool = False) -> None:
    if scan:
        await record_fleet_scan(tag)
        return
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=installed_binary("temporal-test-server"),
    )
    await ensure_search_attributes(env.client)
    if active_checks:
        try:
            await record_active_checks(env, tag)
        finally:
            await env.shutdown()
        return
    if job_guard:
        try:
            await record_job_guard(env, tag)
        finally:
            await env.shutdown()
        return
    runbooks = RunbookSet(load_runbooks([ROOT / "runbooks"]))
    try:
        for name, (fault, approve, node) in SCENARIOS.items():
            fleet = SimFleet(nodes=2)
            finding = fleet.inject(node, fault, gpu=1)
            async with running_workers(env.client, fleet) as queues:
                handle = await report(env.client, queues, finding, runbooks.match(finding))
                if approve:
                    await wait_for_phase(env, handle, Phase.AWAITING_APPROVAL)
                    await APPROVE.send(handle, ApproveRequest(by="recorder"))
                await handle.result()
                history = await handle.fetch_history()
                budget = env.client.get_workflow_handle(budget_workflow_id(queues.pool))
                budget_history = await budget.fetch_history()  # still running: a prefix
            (HERE / f"{name}{'_' + tag if tag else ''}.json").write_text(history.to_json())
            print(f"recorded {name}")
            # The budget's shape, once per tag, and (from v5) the budget a holder told that it
            # waits for a person (the replacement's approval).
            budget_name = {"reset_fixes_ecc": "budget", "replace_after_approval": "budget_people"}
            if tag:
                recorded = f"{budget_name[name]}_{tag}"
                (HERE / f"{recorded}.json").write_text(budget_history.to_json())
                print(f"recorded {recorded}")
    finally:
        await env.shutdown()


async def record_job_guard(env: WorkflowEnvironment, tag: str) -> None:
    """A guarded job: a platform failure (restart after the backoff), then an application one
    (stop)."""
    from tests.test_job_guard import guarded, hardware_failure, oom
    from workflows.job_guard import JobGuard

    fleet = SimFleet(nodes=2)
    async with guarded(env, fleet, GuardPolicy()) as (handle, job, _):
        node = sorted(fleet.nodes)[0]
        await handle.signal(
            JobGuard.pod_failed, hardware_failure(node, job, await env.get_current_time())
        )
        await env.sleep(timedelta(minutes=5))
        await handle.signal(JobGuard.pod_failed, oom(node, job, await env.get_current_time()))
        await handle.result()
        history = await handle.fetch_history()
    name = f"job_guard_restart_then_stop{'_' + tag if tag else ''}"
    (HERE / f"{name}.json").write_text(history.to_json())
    print(f"recorded {name}")


async def record_active_checks(env: WorkflowEnvironment, tag: str) -> None:
    """A pool's round: one idle node checked, one busy stale node taken out under the budget
    (its ActiveCheck: lease, cordon, drain, diagnose, uncordon), one failing idle node."""
    from tests.test_active_checks import mark_checked
    from workflows.active_checks import ActiveChecks

    fleet = SimFleet(nodes=3, gpus_per_node=2)
    idle, busy, failing = sorted(fleet.nodes)
    for node in (idle, failing):
        fleet.idle(node)
    mark_checked(fleet, [idle, failing], timedelta(days=2))
    mark_checked(fleet, [busy], timedelta(days=8))
    fleet.inject(failing, "silent_under_load", gpu=1)
    async with running_workers(env.client, fleet) as queues:
        handle = await env.client.start_workflow(
            ActiveChecks.run,
            ActiveChecksInput(pool=queues.pool, node_task_queue=queues.agents),
            id=active_checks_workflow_id(queues.pool),
            task_queue=queues.controller,
        )
        await handle.result()
        histories = {
            "active_checks_round": await handle.fetch_history(),
            "active_check_taken_out": await env.client.get_workflow_handle(
                active_check_workflow_id(busy)
            ).fetch_history(),
        }
    for name, history in histories.items():
        name = f"{name}{'_' + tag if tag else ''}"
        (HERE / f"{name}.json").write_text(history.to_json())
        print(f"recorded {name}")


async def record_fleet_scan(tag: str) -> None:
    """Fleet scans a second apart on a real schedule (the dev server: the scan lists running
    ladders from visibility) over a silent agent (silent for ten minutes by its last
    heartbeat), a problem condition no agent reported, and a healthy node, until the silent
    node has its ladder; the scan that started the most is kept (the latest of equals)."""
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=installed_binary("temporal"),
        search_attributes=search_attributes.ALL,
    )
    fleet = SimFleet(nodes=3, gpus_per_node=2)
    silent, sick, _ = sorted(fleet.nodes)
    fleet.silence_agent(silent, since=datetime.now(UTC) - timedelta(minutes=10))
    fleet.inject(sick, "ecc_dbe", gpu=1)
    host = fleet.host(sick)
    found = probe_node(sick, host.nvml(), host.probe_config)
    fleet.cluster.marks.set_conditions(sick, conditions_from(found, [], datetime.now(UTC)))
    client = env.client

    async def silent_ladder() -> bool:
        try:
            await client.get_workflow_handle(remediation_workflow_id(silent)).describe()
        except RPCError:
            return False
        return True

    try:
        async with running_workers(client, fleet) as queues:
            inp = ScanInput(node_task_queue=queues.agents, agent_silent_after=timedelta(seconds=3))
            async with scan_schedule(client, inp, queues.controller) as schedule:
                await until("the silent node has its ladder", silent_ladder)
                started = (await schedule.describe()).info.num_actions

                async def another() -> bool:  # with overlap skip: the one before has ended
                    return (await schedule.describe()).info.num_actions > started

                await until("one scan more", another)
                scans = await completed_scans(client, schedule)
    finally:
        await env.shutdown()
    # The busiest, the latest of equals (one handed the scan before's result).
    busiest = max(reversed([history for _, history in scans]), key=lambda h: len(h.events))
    name = f"fleet_scan{'_' + tag if tag else ''}"
    (HERE / f"{name}.json").write_text(busiest.to_json())
    print(f"recorded {name} (the busiest of {len(scans)} scans)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="", help="suffix of the files, e.g. v2")
    parser.add_argument("--job-guard", action="store_true", help="record JobGuard's instead")
    parser.add_argument(
        "--active-checks", action="store_true", help="record ActiveChecks' and ActiveCheck's"
    )
    parser.add_argument("--fleet-scan", action="store_true", help="record FleetScan's")
    args = parser.parse_args()
    asyncio.run(main(args.tag, args.job_guard, args.active_checks, args.fleet_scan))
