"""The embedded default: a dev Temporal server with its Web UI, the controller worker, and a
simulated GPU fleet whose faults start real NodeRemediation ladders at a visible rate."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio import workflow as temporal_workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.messages import REMEDIATION_STATE
from contract.names import (
    CONTROLLER_TASK_QUEUE,
    FLEET_SCAN_SCHEDULE,
    SIM_AGENTS_TASK_QUEUE,
    active_checks_schedule_id,
)
from remedy.active_checks import ActiveCheckPolicy, ActiveChecksInput
from remedy.admission import AdmissionPolicy
from remedy.attribution.guard import GuardPolicy, JobRef
from remedy.budget import BudgetPolicy
from remedy.durations import format_duration
from remedy.fleet import ScanInput
from remedy.models import NodeRef
from remedy.remediation import FindingReport
from remedy.runbook import RunbookSet, load_runbooks
from workers.client import connect_with, ensure_search_attributes, metrics_runtime, report_finding
from workers.connection import ConnectOptions
from workers.controller import controller_worker, node_agent_worker
from workers.dev_server import dev_server
from workers.job_status import HEADERS as JOB_HEADERS
from workers.job_status import JobRow, job_rows
from workers.job_status import table_rows as job_table
from workers.schedules import ensure_active_checks, ensure_fleet_scan
from workers.status import NoScanYet, fleet_status, render
from workers.tables import plain
from workflows.node_remediation import NodeRemediation

# Odds of each simulated fault, loosely after the Llama 3 interruption table: faulty GPUs and
# HBM dominate, software and transient causes follow.
FAULT_WEIGHTS = {
    "ecc_dbe": 0.25,
    "gpu_lost": 0.2,
    "mcu_halt": 0.15,
    "thermal_transient": 0.15,
    "app_xid": 0.15,
    "remap_failure": 0.1,
}
STATUS_EVERY_S = 5.0
JOB_NODES = 4
SCAN_EVERY = timedelta(seconds=5)


class PortInUse(Exception):
    pass


@dataclass
class DemoConfig:
    nodes: int = 16
    gpus_per_node: int = 8
    fault_every_s: float = 3.0
    speedup: float = 60.0
    duration_s: float | None = None
    seed: int = 1
    runbooks: Path = Path("runbooks")
    node_prefix: str = "gpu-node"
    pool: str = "default"
    task_queue: str = CONTROLLER_TASK_QUEUE
    agents_task_queue: str = SIM_AGENTS_TASK_QUEUE
    joining_nodes: int = 1  # new nodes that join mid-demo and go through admission
    jobs: int = 2  # guarded lockstep training jobs, 4 nodes each (as many as the fleet holds)
    job_namespace: str = "ml"
    # Active checks, in the demo's wall time (None: off); the last node is idle and carries a
    # fault only load shows, so the first round finds it.
    active_checks: ActiveCheckPolicy | None = ActiveCheckPolicy(
        every=timedelta(seconds=15),
        interval=timedelta(minutes=1),
        max_age=timedelta(minutes=10),
        lease_wait=timedelta(seconds=30),
    )

    @property
    def scan_schedule(self) -> str:
        """One schedule per controller queue, so two demos on one server stay apart."""
        return self._own(FLEET_SCAN_SCHEDULE)

    @property
    def checks_schedule(self) -> str:
        return self._own(active_checks_schedule_id(self.pool))

    def _own(self, schedule: str) -> str:
        own = self.task_queue == CONTROLLER_TASK_QUEUE
        return schedule if own else f"{schedule}-{self.task_queue}"


@dataclass
class DemoSummary:
    faults_injected: int = 0
    runs: list[tuple[str, str]] = field(default_factory=list)  # (workflow id, run id)
    outcomes: Counter[str] = field(default_factory=Counter)  # closed: by outcome; open: phase
    jobs: list[JobRow] = field(default_factory=list)  # the guarded jobs, as the guards tell

    @property
    def workflow_ids(self) -> list[str]:
        return list(dict.fromkeys(workflow_id for workflow_id, _ in self.runs))

    def lines(self) -> list[str]:
        out = [
            f"Remediations by outcome ({len(self.runs)} remediations on "
            f"{len(self.workflow_ids)} nodes, {self.faults_injected} faults injected):"
        ]
        out += [f"  {name:<28} {count:>4}" for name, count in sorted(self.outcomes.items())]
        if self.jobs:
            out += [
                "",
                "Guarded jobs (remedy status --jobs):",
                *(f"  {line}" for line in plain(JOB_HEADERS, job_table(self.jobs))),
            ]
        return out


async def run_embedded_demo(
    config: DemoConfig,
    *,
    port: int | None,
    ui_port: int | None,
    db: Path,
    echo: Callable[[str], None] = print,
) -> DemoSummary:
    runbooks = _load(config)  # fail on a broken runbook before starting anything
    if port is not None and not _port_free(port):
        raise PortInUse(
            f"port {port} is already in use: pass another --port, or omit it to pick a free one"
        )
    if ui_port is not None and not _port_free(ui_port):
        raise PortInUse(
            f"UI port {ui_port} is already in use: pass another --ui-port, or omit "
            "it to use 8233 or a free port"
        )
    port = port or _free_port()
    ui_port = ui_port or (8233 if _port_free(8233) else _free_port())
    db.parent.mkdir(parents=True, exist_ok=True)
    log = db.with_suffix(".log")
    _stop_on_sigterm()
    async with dev_server(port, ui_port, db, log) as client:
        echo(f"Temporal server  127.0.0.1:{port} (log: {log})")
        echo(f"Temporal Web UI  http://127.0.0.1:{ui_port}/namespaces/default/workflows")
        echo(f"History kept in  {db}")
        return await run_demo(client, config, runbooks, echo)


def _stop_on_sigterm() -> None:
    """SIGTERM (docker stop, kill) ends the demo like Ctrl-C: summary, then shutdown."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def run_demo_on(
    server: ConnectOptions,
    config: DemoConfig,
    echo: Callable[[str], None] = print,
    metrics_bind: str | None = None,
) -> DemoSummary:
    """The demo against a Temporal server that is already running (e.g. docker compose)."""
    runbooks = _load(config)
    _stop_on_sigterm()
    client = await connect_with(
        server, "demo", runtime=metrics_runtime(metrics_bind, "demo") if metrics_bind else None
    )
    await ensure_search_attributes(client)
    echo(f"Temporal server  {client.service_client.config.target_host}")
    return await run_demo(client, config, runbooks, echo)


async def run_demo(
    client: Client,
    config: DemoConfig,
    runbooks: RunbookSet | None = None,
    echo: Callable[[str], None] = print,
) -> DemoSummary:
    """Inject faults into a simulated fleet and let real workflows remediate them, until
    ``duration_s`` passes or the task is cancelled (Ctrl-C); then summarise."""
    runbooks = runbooks or _load(config)
    # Workflow warnings (a storm breaker tripping) read better here without the context dict.
    temporal_workflow.logger.workflow_info_on_message = False
    fleet = SimFleet(
        nodes=config.nodes,
        gpus_per_node=config.gpus_per_node,
        seed=config.seed,
        speedup=config.speedup,
        name_prefix=config.node_prefix,
        pool=config.pool,
    )
    summary = DemoSummary()
    echo(
        f"Simulated fleet  {config.nodes} nodes × {config.gpus_per_node} GPUs, a fault every "
        f"{config.fault_every_s:g}s, runbook time {config.speedup:g}× faster"
    )
    jobs = _launch_jobs(config, fleet, echo)
    with ThreadPoolExecutor(max_workers=16) as executor:
        async with (
            controller_worker(
                client,
                fleet.cluster,
                executor,
                config.task_queue,
                _demo_policy(config),
                runbooks,
                jobs=jobs,
            ),
            node_agent_worker(client, fleet.host, executor, config.agents_task_queue),
        ):
            await ensure_fleet_scan(
                client,
                SCAN_EVERY,
                config.task_queue,
                ScanInput(
                    node_task_queue=config.agents_task_queue,
                    admission=AdmissionPolicy(gap=AdmissionPolicy().gap / config.speedup),
                    watch_jobs=True,
                    guard_policy=_guard_policy(config),
                ),
                schedule_id=config.scan_schedule,
            )
            echo(f"Fleet scan       every {SCAN_EVERY.seconds}s (schedule {config.scan_schedule})")
            schedules = [config.scan_schedule]
            if config.active_checks is not None:
                schedules.append(await _active_checks(client, config, fleet, echo))
            try:
                await _inject_until_done(client, config, fleet, jobs, runbooks, summary, echo)
            except asyncio.CancelledError:
                echo("stopping…")
            try:
                await _summarise(client, summary)
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
    for line in [*summary.lines(), "", *fleet_lines]:
        echo(line)
    return summary


async def _inject_until_done(
    client: Client,
    config: DemoConfig,
    fleet: SimFleet,
    jobs: SimJobs,
    runbooks: RunbookSet,
    summary: DemoSummary,
    echo: Callable[[str], None],
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    next_status = start + STATUS_EVERY_S
    joined = 0
    while config.duration_s is None or loop.time() - start < config.duration_s:
        finding = fleet.inject_random(FAULT_WEIGHTS)
        runbook = runbooks.match(finding)
        if runbook is not None:
            summary.faults_injected += 1
            handle = await report_finding(
                client,
                NodeRef(name=finding.node, pool=config.pool),
                FindingReport(finding=finding, runbook=runbook),
                node_task_queue=config.agents_task_queue,
                task_queue=config.task_queue,
            )
            run = (handle.id, handle.result_run_id or "")
            if run not in summary.runs:  # a report that joined a running ladder is not new
                summary.runs.append(run)
            echo(f"  fault  {finding.node}: {finding.headline()} → {runbook.name}")
        for job in jobs.fault(finding):
            echo(f"  job    {job}: every rank failed with {finding.node} (its guard decides)")
        if loop.time() >= next_status:
            next_status += STATUS_EVERY_S
            if joined < config.joining_nodes:  # new hardware arrives: admission validates it
                new = fleet.join(f"{config.node_prefix}-new-{joined:03d}")
                joined += 1
                echo(f"  join   {new.name}: behind the admission taint until it passes twice")
            await _summarise(client, summary)
            states = ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items()))
            echo(f"[{loop.time() - start:5.0f}s] {states}")
        await asyncio.sleep(config.fault_every_s)


async def _summarise(client: Client, summary: DemoSummary) -> None:
    """The outcome of every remediation started, or the phase it is in while it runs."""
    counts: Counter[str] = Counter()
    for workflow_id, run_id in summary.runs:
        handle = client.get_workflow_handle_for(NodeRemediation.run, workflow_id, run_id=run_id)
        status = (await handle.describe()).status
        if status is WorkflowExecutionStatus.CONTINUED_AS_NEW:  # report where the chain is now
            handle = client.get_workflow_handle_for(NodeRemediation.run, workflow_id)
            status = (await handle.describe()).status
        if status is WorkflowExecutionStatus.COMPLETED:
            counts[(await handle.result()).outcome.value] += 1
        elif status is WorkflowExecutionStatus.RUNNING:
            state = await REMEDIATION_STATE.ask(handle)
            counts[f"running: {state.phase.value}"] += 1
        else:
            counts[f"workflow {status.name.lower() if status else 'unknown'}"] += 1
    summary.outcomes = counts


async def _active_checks(
    client: Client, config: DemoConfig, fleet: SimFleet, echo: Callable[[str], None]
) -> str:
    policy = config.active_checks or ActiveCheckPolicy()
    nodes = sorted(fleet.nodes)
    spare = nodes[min(config.jobs, len(nodes) // JOB_NODES) * JOB_NODES :]  # no job's ranks
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


def _launch_jobs(config: DemoConfig, fleet: SimFleet, echo: Callable[[str], None]) -> SimJobs:
    """Guarded lockstep jobs on the first nodes, one rank per node, 4 nodes each."""
    jobs, nodes = SimJobs(), sorted(fleet.nodes)
    for i in range(min(config.jobs, len(nodes) // JOB_NODES)):
        job = JobRef(namespace=config.job_namespace, name=f"llm-pretrain-{i}")
        jobs.launch(job, nodes[i * JOB_NODES : (i + 1) * JOB_NODES])
        echo(f"Guarded job      {job} on {', '.join(jobs.running[job])}")
    return jobs


def _guard_policy(config: DemoConfig) -> GuardPolicy:
    default = GuardPolicy()
    return GuardPolicy(
        gather=default.gather / config.speedup,
        backoff_initial=default.backoff_initial / config.speedup,
        backoff_max=default.backoff_max / config.speedup,
    )


def _demo_policy(config: DemoConfig) -> BudgetPolicy:
    """The default budget with its clocks sped up like the runbooks'."""
    default = BudgetPolicy()
    return default.model_copy(
        update={
            "storm_window": default.storm_window / config.speedup,
            "reclaim_every": default.reclaim_every / config.speedup,
        }
    )


def _load(config: DemoConfig) -> RunbookSet:
    return RunbookSet(r.scaled(config.speedup) for r in load_runbooks([config.runbooks]))


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
