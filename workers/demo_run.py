"""One demo run on a Temporal server: the controller and the simulated agents as workers, the
fleet scan and active checks as schedules, guarded jobs, and faults injected at a visible rate
until the run ends; then the summary."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from temporalio import workflow as temporal_workflow
from temporalio.client import Client
from temporalio.service import RPCError

from adapters.sim.identity import as_agent
from remedy.attribution.guard import JobRef
from remedy.core.durations import format_duration
from remedy.core.models import Finding, NodeRef
from remedy.ladder.remediation import FindingReport
from remedy.runbook import Runbook, RunbookSet
from remedy.scan.active_checks import ActiveCheckPolicy, ActiveChecksInput
from remedy.scan.admission import AdmissionPolicy
from remedy.scan.fleet import ScanInput
from workers import demo_shared, demo_slow
from workers.client import report_finding
from workers.controller import controller_worker, node_agent_worker
from workers.demo_config import (
    FAULT_WEIGHTS,
    JOB_NODES,
    SCAN_EVERY,
    STATUS_EVERY_S,
    DemoConfig,
    DemoRunbooks,
    budget_policy,
    demo_provider,
    demo_runbooks,
    guard_policy,
    spare_nodes,
)
from workers.demo_console import one_line_events
from workers.demo_shared import SharedNode, shared_node
from workers.demo_summary import DemoSummary, summarise
from workers.door import DoorSettings
from workers.job_status import job_rows
from workers.providers.sim import SimFleet, SimProvider
from workers.schedules import ensure_active_checks, ensure_fleet_scan
from workers.status import NoScanYet, fleet_status
from workers.status_table import render


async def run_demo(
    client: Client,
    config: DemoConfig,
    runbooks: DemoRunbooks | None = None,
    echo: Callable[[str], None] = print,
) -> DemoSummary:
    """Inject faults into a simulated fleet and let real workflows remediate them, until
    ``duration_s`` passes or the task is cancelled (Ctrl-C); then summarise. What the workers
    log on the way is one line each through ``echo`` (demo_console), unless it is an error."""
    runbooks = runbooks or demo_runbooks(config)
    # Workflow warnings (a storm breaker tripping) read better here without the context dict.
    temporal_workflow.logger.workflow_info_on_message = False
    provider = demo_provider(config)
    fleet = provider.fleet
    echo(
        f"Simulated fleet  {config.nodes} nodes × {config.gpus_per_node} GPUs, a fault every "
        f"{config.fault_every_s:g}s, runbook time {config.speedup:g}× faster"
    )
    shared = shared_node(config, fleet, runbooks)
    if shared is not None:
        echo(demo_shared.introduce(shared, fleet))
    with one_line_events(echo):
        summary, fleet_lines = await _run(client, config, provider, runbooks, shared, echo)
    for line in [*summary.lines(), "", *fleet_lines]:
        echo(line)
    return summary


async def _run(
    client: Client,
    config: DemoConfig,
    provider: SimProvider,
    runbooks: DemoRunbooks,
    shared: SharedNode | None,
    echo: Callable[[str], None],
) -> tuple[DemoSummary, list[str]]:
    summary, fleet, jobs = DemoSummary(), provider.fleet, provider.jobs
    _launch_jobs(config, provider, echo)
    slow = demo_slow.slow_node(config, provider)
    if slow is not None:
        echo(demo_slow.introduce(slow, jobs))
    parts = provider.controller()
    with ThreadPoolExecutor(max_workers=16) as executor:
        async with (
            controller_worker(
                client,
                parts.cluster,
                executor,
                config.task_queue,
                budget_policy(config),
                runbooks.fleet,
                jobs=parts.jobs,
                # The fleet's agents share one queue; the shared node's asks for its pool's own.
                door=DoorSettings(
                    agents_queue=config.agents_task_queue, pool_runbooks=runbooks.shared
                ),
            ),
            node_agent_worker(client, provider.host_for, executor, config.agents_task_queue),
        ):
            await ensure_fleet_scan(
                client,
                SCAN_EVERY,
                config.task_queue,
                ScanInput(
                    node_task_queue=config.agents_task_queue,
                    admission=AdmissionPolicy(gap=AdmissionPolicy().gap / config.speedup),
                    watch_jobs=True,
                    guard_policy=guard_policy(config),
                ),
                schedule_id=config.scan_schedule,
            )
            echo(f"Fleet scan       every {SCAN_EVERY.seconds}s (schedule {config.scan_schedule})")
            schedules = [config.scan_schedule]
            if config.active_checks is not None:
                schedules.append(await _active_checks(client, config, fleet, echo))
            watching = []
            try:
                if shared is not None:  # the first fault, while the budget has room
                    await _report(client, config, summary, echo, *demo_shared.inject(fleet, shared))
                    watching.append(asyncio.create_task(demo_shared.watch(fleet, shared, echo)))
                if slow is not None:  # no agent reports it: its job's guard finds it
                    echo(demo_slow.inject(fleet, jobs, slow))
                    told = demo_slow.watch(client, provider, slow, echo)
                    watching.append(asyncio.create_task(told))
                # Random faults pass the shared and the slow node by: each tells its own story.
                spared = [n.name for n in (shared, slow) if n is not None]
                await _inject_until_done(
                    client, config, provider, runbooks.fleet, spared, summary, echo
                )
            except asyncio.CancelledError:
                echo("stopping…")
            for task in watching:
                task.cancel()
            try:
                await summarise(client, summary)
                summary.jobs = [
                    r
                    for r in await job_rows(client)
                    if r.job.split("/", 1)[0] == config.job_namespace
                ]
                fleet_lines = render(await fleet_status(client, config.scan_schedule))
            except NoScanYet:
                fleet_lines = ["no fleet scan completed yet"]
            except RPCError as exc:
                echo(f"could not read the outcomes from Temporal: {exc}")
                fleet_lines = []
            finally:  # scans must not pile up on a queue nobody serves once the demo ends
                for schedule in schedules:
                    with contextlib.suppress(RPCError):
                        await client.get_schedule_handle(schedule).delete()
    return summary, fleet_lines


async def _inject_until_done(
    client: Client,
    config: DemoConfig,
    provider: SimProvider,
    runbooks: RunbookSet,
    spared: list[str],
    summary: DemoSummary,
    echo: Callable[[str], None],
) -> None:
    """Random faults on every node but the ``spared`` ones (the shared node, the slow one:
    each tells its own story)."""
    fleet, jobs = provider.fleet, provider.jobs
    loop = asyncio.get_running_loop()
    start = loop.time()
    next_status = start + STATUS_EVERY_S
    joined = 0
    while config.duration_s is None or loop.time() - start < config.duration_s:
        others = [n for n in fleet.nodes if n not in spared] if spared else None
        finding = fleet.inject_random(FAULT_WEIGHTS, nodes=others)
        quiet = demo_slow.unreported(finding, provider)  # a slow node: no agent reports it
        if quiet is not None:
            echo(quiet)
        else:
            await _report(client, config, summary, echo, finding, runbooks.match(finding))
        for job in jobs.fault(finding):
            echo(f"  job    {job}: every rank failed with {finding.node} (its guard decides)")
        if loop.time() >= next_status:
            next_status += STATUS_EVERY_S
            if joined < config.joining_nodes:  # new hardware arrives: admission validates it
                new = fleet.join(f"{config.node_prefix}-new-{joined:03d}")
                joined += 1
                echo(f"  join   {new.name}: behind the admission taint until it passes twice")
            await summarise(client, summary)
            states = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items()))
            echo(f"[{loop.time() - start:5.0f}s] {states}")
        await asyncio.sleep(config.fault_every_s)
        stop_if_asked()


def stop_if_asked() -> None:
    """Ctrl-C cancels the demo's task once (asyncio.run), and an await that finished as the
    cancel came may swallow it (Python 3.11's wait_for): the request stays counted, so the
    demo stops at the next fault instead of running on."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _report(
    client: Client,
    config: DemoConfig,
    summary: DemoSummary,
    echo: Callable[[str], None],
    finding: Finding,
    runbook: Runbook | None,
) -> None:
    """Report the finding as the node's agent would, when its runbook asks for a ladder."""
    if runbook is None:
        return
    summary.faults_injected += 1
    handle = await report_finding(
        client,
        NodeRef(name=finding.node, pool=config.pool),
        as_agent(FindingReport(finding=finding, runbook=runbook), datetime.now(UTC)),
        node_task_queue=config.agents_task_queue,
        task_queue=config.task_queue,
    )
    run = (handle.id, handle.result_run_id or "")
    if run not in summary.runs:  # a report that joined a running ladder is not new
        summary.runs.append(run)
    echo(f"  fault  {finding.node}: {finding.headline()} → {runbook.name}")


async def _active_checks(
    client: Client, config: DemoConfig, fleet: SimFleet, echo: Callable[[str], None]
) -> str:
    policy = config.active_checks or ActiveCheckPolicy()
    spare = spare_nodes(config, fleet)
    silent = f"; {spare[-1]} is idle with a fault only load shows" if spare else ""
    if spare:
        fleet.idle(spare[-1])
        fleet.inject(spare[-1], "silent_under_load", gpu=0)
    inp = ActiveChecksInput(
        pool=config.pool, policy=policy, node_task_queue=config.agents_task_queue
    )
    schedule = await ensure_active_checks(client, inp, config.task_queue, config.checks_schedule)
    echo(
        f"Active checks    every {format_duration(policy.every)}: idle nodes after "
        f"{format_duration(policy.interval)}, busy ones taken out after "
        f"{format_duration(policy.max_age)} (schedule {schedule}){silent}"
    )
    return schedule


def _launch_jobs(config: DemoConfig, provider: SimProvider, echo: Callable[[str], None]) -> None:
    """Guarded lockstep jobs on the first nodes, one rank per node, 4 nodes each."""
    jobs, nodes = provider.jobs, sorted(provider.fleet.nodes)
    for i in range(min(config.jobs, len(nodes) // JOB_NODES)):
        job = JobRef(namespace=config.job_namespace, name=f"llm-pretrain-{i}")
        jobs.launch(job, nodes[i * JOB_NODES : (i + 1) * JOB_NODES])
        echo(f"Guarded job      {job} on {', '.join(jobs.running[job])}")
