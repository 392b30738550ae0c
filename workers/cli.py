"""The `remedy` command."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from temporalio.service import RPCError

from adapters.host.kernel_log import KernelLogTail
from adapters.host.local import LocalHost, boot_time
from adapters.host.nics import SysfsNics
from adapters.host.nvml import real_nvml
from adapters.sim import FAULTS, SimFleet
from remedy.models import NodeRef
from remedy.names import CONTROLLER_TASK_QUEUE, FLEET_SCAN_SCHEDULE
from remedy.probe import ProbeConfig, probe_node
from remedy.runbook import Runbook, RunbookError, RunbookSet, load_runbooks
from remedy.xid import parse_kernel_log

if TYPE_CHECKING:
    from remedy.attribution.rules import Attributor
    from workers.status import FleetStatus

app = typer.Typer(
    help="remedy keeps GPU fleets healthy.", no_args_is_help=True, pretty_exceptions_enable=False
)
runbooks_app = typer.Typer(help="Author and check runbooks.", no_args_is_help=True)
app.add_typer(runbooks_app, name="runbooks")
xid_app = typer.Typer(help="NVIDIA Xid errors.", no_args_is_help=True)
app.add_typer(xid_app, name="xid")

DEFAULT_RUNBOOKS = Path(__file__).resolve().parent.parent / "runbooks"
ADDRESS_HELP = "Temporal server host:port."
MetricsOption = Annotated[
    str | None,
    typer.Option(
        help="Serve Prometheus metrics on this host:port at /metrics (e.g. 0.0.0.0:9464)."
    ),
]
AddressOption = Annotated[str, typer.Option(help=ADDRESS_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@runbooks_app.command("validate")
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Runbook files or folders.")],
) -> None:
    """Check runbooks: exit 0 when all are valid, else one FILE:LINE: FIELD: message per error."""
    try:
        runbooks = load_runbooks(paths)
    except RunbookError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        typer.echo(f"{len(exc.problems)} problem(s); nothing loaded", err=True)
        raise typer.Exit(1) from None
    for runbook in runbooks:
        ladder = " → ".join(r.action.value for r in runbook.ladder) or "hold for a human"
        typer.echo(f"ok  {runbook.name}: {ladder}")


RunbooksOption = Annotated[Path, typer.Option(help="Runbook folder.")]


@runbooks_app.command("explain")
def explain(
    name: Annotated[str, typer.Argument(help="The runbook's name.")],
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
) -> None:
    """The ladder in plain words: what happens when, and the latest each rung can start."""
    from remedy.runbook.explain import explain as explain_runbook

    typer.echo("\n".join(explain_runbook(_runbook_or_exit(runbooks, name))))


@runbooks_app.command("rehearse")
def rehearse(
    name: Annotated[str, typer.Argument(help="The runbook's name.")],
    fault: Annotated[
        str | None,
        typer.Option(
            help="The simulated fault that is really there (it decides which rung fixes the node):"
            f" one of {', '.join(FAULTS)}, or none. Default: one the runbook matches."
        ),
    ] = None,
    approve: Annotated[
        bool,
        typer.Option(
            help="Give every approval the moment it is asked; --no-approve lets them time out."
        ),
    ] = True,
    gpu: Annotated[int, typer.Option(min=0, max=7, help="The faulty GPU.")] = 0,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Climb the runbook for real on Temporal's time-skipping server against one simulated
    node, and print the timeline it produces (hours of workflow time in about a second)."""
    from workers.rehearse import RehearsalStuck, timeline
    from workers.rehearse import rehearse as run_rehearsal

    chosen = _runbook_or_exit(runbooks, name)
    try:
        done = asyncio.run(run_rehearsal(chosen, fault, approve=approve, gpu=gpu))
    except KeyError as exc:
        typer.echo(f"error: --fault: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None
    except RehearsalStuck as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(done.model_dump_json(indent=2) if as_json else "\n".join(timeline(done)))


@runbooks_app.command("schema")
def schema() -> None:
    """The runbook format as JSON Schema, for editor completion and checks. Save it and point
    the YAML language server at it: `# yaml-language-server: $schema=runbook.schema.json`."""
    import json

    from remedy.runbook.schema import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@xid_app.command("parse")
def xid_parse(
    source: Annotated[str, typer.Argument(help="Kernel log file, or - for standard input.")] = "-",
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Find Xid events in a kernel log (dmesg, /dev/kmsg, journald text): code, PCI address,
    pid and process, GPU UUID, fault class and NVIDIA's recommended first action."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(errors="replace")
    except OSError as exc:
        typer.echo(f"error: cannot read {source}: {exc.strerror}", err=True)
        raise typer.Exit(2) from None
    for event in parse_kernel_log(text.splitlines()):
        if as_json:
            typer.echo(event.model_dump_json())
        else:
            who = f" pid={event.pid} {event.process or ''}" if event.pid else ""
            typer.echo(
                f"line {event.line}: Xid {event.code} on {event.pci_bus_id}"
                f"{' ' + event.gpu_uuid if event.gpu_uuid else ''}{who}: "
                f"{event.fault_class} → {event.recommended_action}"
            )


@app.command()
def probe(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    node: Annotated[str, typer.Option(help="Node name in the report.")] = socket.gethostname(),
    expected_gpus: Annotated[int | None, typer.Option(help="GPUs this node should have.")] = None,
    expected_nics: Annotated[int | None, typer.Option(help="RDMA devices it should have.")] = None,
    nic_rate: Annotated[float | None, typer.Option(help="Expected port rate, Gb/s.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each check may take.")] = 5.0,
    kernel_log: Annotated[
        Path | None, typer.Option(help="Kernel log read for Xids when NVML is broken.")
    ] = None,
    simulate: Annotated[
        str | None,
        typer.Option(help="Probe a simulated 8-GPU node with this fault instead (e.g. ecc_dbe)."),
    ] = None,
) -> None:
    """Probe this node. Exit 0 healthy, 1 unhealthy, 2 could not probe."""
    config = ProbeConfig(
        expected_gpus=expected_gpus,
        check_timeout_s=timeout,
        nics=SysfsNics() if expected_nics else None,
        expected_nics=expected_nics,
        expected_nic_rate_gbps=nic_rate,
        kernel_log=KernelLogTail(kernel_log) if kernel_log else None,
        not_before=boot_time(),
    )
    if simulate and simulate != "none" and simulate not in FAULTS:
        typer.echo(
            f"error: --simulate: unknown fault {simulate!r}; known: none, "
            f"{', '.join(sorted(FAULTS))}",
            err=True,
        )
        raise typer.Exit(2)
    if simulate:
        fleet = SimFleet(nodes=1, name_prefix=node)
        node = next(iter(fleet.nodes))
        if simulate != "none":
            fleet.inject(node, simulate, 0)
        host = fleet.host(node)
        report = probe_node(node, host.nvml(), host.probe_config)
    else:
        report = probe_node(node, real_nvml(), config)
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        verdict = "healthy" if report.healthy else "UNHEALTHY"
        typer.echo(
            f"{report.node}: {verdict} ({', '.join(report.checks_run) or 'no checks ran'}"
            f"; {report.duration_s * 1000:.1f} ms)"
        )
        for finding in report.findings:
            typer.echo(
                f"  {finding.severity.value:<8} {finding.check}/{finding.reason} "
                f"{finding.component.describe()}: {finding.evidence}"
            )
    raise typer.Exit(0 if report.healthy else 1 if report.checks_run else 2)


@app.command()
def agent(
    node: Annotated[str, typer.Option(help="This node's name (the Kubernetes node).")],
    address: Annotated[str, typer.Option(help="Temporal server host:port.")] = "localhost:7233",
    pool: Annotated[str, typer.Option(help="Node pool.")] = "default",
    runbooks: Annotated[Path, typer.Option(help="Runbook folder.")] = DEFAULT_RUNBOOKS,
    interval: Annotated[float, typer.Option(help="Seconds between probes.")] = 30.0,
    expected_gpus: Annotated[int | None, typer.Option(help="GPUs this node should have.")] = None,
    expected_nics: Annotated[int | None, typer.Option(help="RDMA devices it should have.")] = None,
    nic_rate: Annotated[float | None, typer.Option(help="Expected port rate, Gb/s.")] = None,
    kernel_log: Annotated[
        Path | None, typer.Option(help="Kernel log to read for Xids when NVML is broken.")
    ] = None,
    cursor: Annotated[
        Path | None, typer.Option(help="Where to keep the kernel-log cursor.")
    ] = None,
    allow_reset: Annotated[bool, typer.Option(help="Allow nvidia-smi --gpu-reset.")] = False,
    allow_reboot: Annotated[bool, typer.Option(help="Allow rebooting this node.")] = False,
    kubernetes: Annotated[
        bool,
        typer.Option(
            help="Publish node conditions to Kubernetes (in-cluster config or --kubeconfig)."
        ),
    ] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="Kubeconfig file.")] = None,
    metrics_bind: MetricsOption = None,
) -> None:
    """Run the node agent: host-local activities on this node's queue, and the probe loop."""
    from adapters.kubernetes.cluster import kubernetes_cluster
    from adapters.kubernetes.config import api_client
    from workers.agent import AgentConfig, NodeAgent
    from workers.client import connect, metrics_runtime

    loaded = _runbooks_or_exit(runbooks)
    config = ProbeConfig(
        expected_gpus=expected_gpus,
        nics=SysfsNics() if expected_nics else None,
        expected_nics=expected_nics,
        expected_nic_rate_gbps=nic_rate,
        kernel_log=KernelLogTail(kernel_log, cursor) if kernel_log else None,
        not_before=boot_time(),
    )
    host = LocalHost(node, config, allow_reset=allow_reset, allow_reboot=allow_reboot)

    async def main() -> None:
        client = await connect(
            address, runtime=metrics_runtime(metrics_bind, "agent") if metrics_bind else None
        )
        cluster = kubernetes_cluster(api_client(kubeconfig)).marks if kubernetes else None
        await NodeAgent(
            client,
            host,
            loaded,
            cluster,
            AgentConfig(node=NodeRef(name=node, pool=pool), interval_s=interval),
        ).run()

    _serve(main)


@app.command()
def controller(
    address: Annotated[str, typer.Option(help="Temporal server host:port.")] = "localhost:7233",
    kubeconfig: Annotated[
        str | None, typer.Option(help="Kubeconfig file (default: in-cluster, then ~/.kube/config).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Record what each destructive action would do; change nothing.")
    ] = False,
    replace_provider: Annotated[
        str,
        typer.Option(
            help="How nodes are replaced: auto (Karpenter if present), karpenter, plain, none."
        ),
    ] = "auto",
    checkpoint_grace: Annotated[
        float,
        typer.Option(help="Seconds a drain waits for GPU pods to checkpoint before evicting them."),
    ] = 0.0,
    max_disruption: Annotated[
        str,
        typer.Option(
            help="Nodes of a pool disrupted at once: a count (2), a share (20%) or all-but-N."
        ),
    ] = "20%",
    storm_share: Annotated[
        float,
        typer.Option(
            help="Share of a pool unhealthy within 10 minutes that pauses disruptive work."
        ),
    ] = 0.2,
    runbooks: Annotated[
        Path,
        typer.Option(
            help="Runbook folder, for ladders the controller starts itself (fleet scan, "
            "admission failures)."
        ),
    ] = DEFAULT_RUNBOOKS,
    scan_every: Annotated[
        float,
        typer.Option(min=0, help="Seconds between fleet scans (a Temporal Schedule); 0: no scan."),
    ] = 60.0,
    blocklist_incidents: Annotated[
        int, typer.Option(help="Incidents on one GPU serial within the window that blocklist it.")
    ] = 3,
    blocklist_days: Annotated[
        float, typer.Option(min=0.01, help="The blocklist's window, in days.")
    ] = 30.0,
    watch_jobs: Annotated[
        bool,
        typer.Option(
            help="Guard jobs labelled remedy.io/guard=true: each scan hands their failed pods to "
            "a JobGuard."
        ),
    ] = True,
    max_job_restarts: Annotated[
        int,
        typer.Option(
            min=0, help="Platform restarts of a guarded job before it is held for a human."
        ),
    ] = 5,
    job_rules: Annotated[
        Path | None,
        typer.Option(help="Attribution rules replacing the shipped ones (see docs/jobs.md)."),
    ] = None,
    metrics_bind: MetricsOption = None,
) -> None:
    """Run the controller worker against a Kubernetes cluster."""
    from concurrent.futures import ThreadPoolExecutor

    from adapters.kubernetes.cluster import kubernetes_cluster
    from adapters.kubernetes.config import api_client
    from adapters.kubernetes.jobs import KubernetesJobs
    from remedy.attribution.guard import GuardPolicy
    from remedy.budget import BudgetPolicy
    from remedy.fleet import ScanInput
    from remedy.hardware import BlocklistPolicy
    from workers.client import connect, ensure_search_attributes, metrics_runtime
    from workers.controller import controller_worker
    from workers.schedules import ensure_fleet_scan

    loaded = _runbooks_or_exit(runbooks)
    attributor = _attributor_or_exit(job_rules)
    try:
        policy = BudgetPolicy(max_disruption=max_disruption, storm_share=storm_share)
        blocklist = BlocklistPolicy(
            max_incidents=blocklist_incidents, window=timedelta(days=blocklist_days)
        )
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            field = {"max_incidents": "blocklist_incidents", "window": "blocklist_days"}.get(
                field, field
            )  # the policy's field → the flag that set it
            typer.echo(
                f"error: --{field.replace('_', '-')}: {error['msg'].removeprefix('Value error, ')}",
                err=True,
            )
        raise typer.Exit(2) from None
    api = api_client(kubeconfig)
    cluster = kubernetes_cluster(
        api,
        dry_run=dry_run,
        replacer=replace_provider,
        checkpoint_grace_s=checkpoint_grace,
    )
    jobs = KubernetesJobs(api, dry_run=dry_run) if watch_jobs else None
    scan = ScanInput(
        watch_jobs=watch_jobs, guard_policy=GuardPolicy(max_platform_restarts=max_job_restarts)
    )

    async def main() -> None:
        client = await connect(
            address, runtime=metrics_runtime(metrics_bind, "controller") if metrics_bind else None
        )
        await ensure_search_attributes(client)
        if scan_every > 0:
            await ensure_fleet_scan(
                client, timedelta(seconds=scan_every), CONTROLLER_TASK_QUEUE, scan
            )
        with ThreadPoolExecutor(max_workers=32) as executor:
            await controller_worker(
                client,
                cluster,
                executor,
                policy=policy,
                runbooks=loaded,
                blocklist=blocklist,
                jobs=jobs,
                attributor=attributor,
            ).run()

    _serve(main)


@app.command()
def demo(
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    nodes: Annotated[int, typer.Option(min=1, help="Simulated GPU nodes.")] = 16,
    gpus: Annotated[int, typer.Option(min=1, help="GPUs per node.")] = 8,
    fault_every: Annotated[float, typer.Option(min=0.1, help="Seconds between faults.")] = 3.0,
    speedup: Annotated[
        float, typer.Option(min=1.0, help="Runbook time runs this much faster.")
    ] = 60.0,
    port: Annotated[int | None, typer.Option(help="Temporal port (default: a free one).")] = None,
    ui_port: Annotated[int | None, typer.Option(help="Web UI port (default 8233 if free).")] = None,
    db: Annotated[Path, typer.Option(help="SQLite file of the dev server.")] = Path(
        ".demo/temporal.sqlite"
    ),
    runbooks: Annotated[Path, typer.Option(help="Runbook folder.")] = DEFAULT_RUNBOOKS,
    seed: Annotated[int, typer.Option(help="Seed of the fault injector.")] = 1,
    address: Annotated[
        str | None,
        typer.Option(
            help="Use this Temporal server (host:port) instead of starting the dev server."
        ),
    ] = None,
    metrics_bind: Annotated[
        str | None, typer.Option(help="With --address: serve Prometheus metrics on this host:port.")
    ] = None,
) -> None:
    """Run the embedded default: dev Temporal server + Web UI + worker + a simulated GPU fleet."""
    from workers.demo import DemoConfig, PortInUse, run_demo_on, run_embedded_demo

    config = DemoConfig(
        nodes=nodes,
        gpus_per_node=gpus,
        fault_every_s=fault_every,
        speedup=speedup,
        duration_s=duration,
        seed=seed,
        runbooks=runbooks,
    )
    try:
        if address:
            asyncio.run(run_demo_on(address, config, metrics_bind=metrics_bind))
        else:
            asyncio.run(run_embedded_demo(config, port=port, ui_port=ui_port, db=db))
    except PortInUse as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except RunbookError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass


@app.command()
def status(
    address: AddressOption = "localhost:7233",
    as_json: JsonOption = False,
    pool: Annotated[str | None, typer.Option(help="Only this pool.")] = None,
    state: Annotated[
        str | None,
        typer.Option(
            help="Only nodes whose state contains this (e.g. tolerating, needs_human, admission)."
        ),
    ] = None,
    waiting: Annotated[
        bool,
        typer.Option("--awaiting-approval", help="Only nodes whose ladder waits for an approval."),
    ] = False,
    schedule: Annotated[
        str, typer.Option(help="The fleet-scan schedule id.")
    ] = FLEET_SCAN_SCHEDULE,
    jobs: Annotated[
        bool,
        typer.Option(
            "--jobs",
            help="Guarded jobs instead: each guard's phase and the time lost to "
            "platform, application and unknown failures.",
        ),
    ] = False,
) -> None:
    """The fleet: each pool's counts, leases and storm breaker (from the latest fleet scan), then
    every node in remediation, in admission or left for a human — state, fault, runbook, rung,
    since when, waiting for approval or not. Exit 0: shown; 3: a pool's storm breaker is
    tripped; 2: nothing to show (no scan and no such node)."""
    from workers.client import connect
    from workers.status import NodeFilter, NoScanYet, fleet_status, show_status

    if jobs:
        _job_status(address, as_json)
    only = NodeFilter(pool=pool, state=state, awaiting_approval=waiting)

    async def read() -> FleetStatus:
        return await fleet_status(await connect(address), schedule, only)

    try:
        shown = asyncio.run(read())
    except (NoScanYet, RuntimeError, OSError, RPCError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(shown.model_dump_json(indent=2))
    else:
        show_status(shown)
    raise typer.Exit(3 if shown.breaker_tripped else 0)


def _job_status(address: str, as_json: bool) -> None:
    """Exit 0: shown; 3: a guard holds a job for a human; 2: no guarded job."""
    import json

    from workers.client import connect
    from workers.job_status import HEADERS, JobRow, held, job_rows, table_rows
    from workers.tables import show as show_table

    async def read() -> list[JobRow]:
        return await job_rows(await connect(address))

    try:
        rows = asyncio.run(read())
    except (RuntimeError, OSError, RPCError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if not rows:
        typer.echo("no guarded job", err=True)
        raise typer.Exit(2)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        show_table(HEADERS, table_rows(rows), title="guarded jobs")
        for job in held(rows):
            namespace, name = job.split("/", 1)
            typer.echo(f"HELD {job}: remedy resume-job {name} --namespace {namespace} [--stop]")
    raise typer.Exit(3 if held(rows) else 0)


USER = os.environ.get("USER", "operator")
ByOption = Annotated[str, typer.Option(help="Who does it (recorded in the workflow).")]


def _signal(address: str, workflow_id: str, signal: str, arg: BaseModel, missing: str) -> None:
    """Signal a running workflow; exit 2 with ``missing`` when there is none."""
    from workers.client import connect

    async def send() -> None:
        client = await connect(address)
        await client.get_workflow_handle(workflow_id).signal(signal, arg)

    try:
        asyncio.run(send())
    except RPCError as exc:
        typer.echo(f"error: {missing} ({exc})", err=True)
        raise typer.Exit(2) from None


def _signal_node(address: str, node: str, signal: str, arg: BaseModel) -> None:
    """Signal the node's running remediation; exit 2 when it has none."""
    from remedy.names import remediation_workflow_id

    _signal(address, remediation_workflow_id(node), signal, arg, f"{node}: no running remediation")


@app.command()
def approve(
    node: Annotated[str, typer.Argument(help="The node whose ladder waits for approval.")],
    address: AddressOption = "localhost:7233",
    rung: Annotated[
        int | None,
        typer.Option(help="Approve this rung ahead of time (default: the rung waiting now)."),
    ] = None,
    by: ByOption = USER,
    note: Annotated[str, typer.Option(help="Why (recorded).")] = "",
) -> None:
    """Approve the rung a node's remediation waits for (e.g. a replacement)."""
    from remedy.remediation import ApproveRequest

    _signal_node(address, node, "approve", ApproveRequest(by=by, rung=rung, note=note))
    typer.echo(f"{node}: approved by {by}")


@app.command()
def abort(
    node: Annotated[str, typer.Argument(help="The node whose ladder to stop.")],
    reason: Annotated[str, typer.Option(help="Why (recorded; required).")],
    address: AddressOption = "localhost:7233",
    restore: Annotated[
        bool, typer.Option(help="Also undo remedy's cordon (default: leave the node as it is).")
    ] = False,
    by: ByOption = USER,
) -> None:
    """Stop a node's remediation where it stands."""
    from remedy.remediation import AbortRequest

    _signal_node(address, node, "abort", AbortRequest(by=by, reason=reason, restore=restore))
    typer.echo(f"{node}: abort sent by {by}")


@app.command()
def show(
    node: Annotated[str, typer.Argument(help="The node.")],
    address: AddressOption = "localhost:7233",
    as_json: JsonOption = False,
) -> None:
    """The node's ladder so far as a timeline: rung, time, action, result, duration, evidence.
    Exit 2 when the node never had a remediation."""
    from workers.client import connect
    from workers.show import NodeLadder, node_ladder, timeline

    async def read() -> NodeLadder:
        return await node_ladder(await connect(address), node)

    try:
        ladder = asyncio.run(read())
    except RPCError as exc:
        typer.echo(f"error: {node}: no remediation found ({exc})", err=True)
        raise typer.Exit(2) from None
    typer.echo(ladder.model_dump_json(indent=2) if as_json else "\n".join(timeline(ladder)))


@app.command()
def trigger(
    node: Annotated[str, typer.Argument(help="The node to remediate.")],
    runbook: Annotated[str, typer.Option(help="The runbook to climb, by name.")],
    reason: Annotated[str, typer.Option(help="Why (the finding's evidence).")] = "by hand",
    pool: Annotated[str, typer.Option(help="The node's pool (its disruption budget).")] = "default",
    address: AddressOption = "localhost:7233",
    runbooks: Annotated[Path, typer.Option(help="Runbook folder.")] = DEFAULT_RUNBOOKS,
    task_queue: Annotated[
        str, typer.Option(help="The controller's task queue.")
    ] = CONTROLLER_TASK_QUEUE,
    node_task_queue: Annotated[
        str | None, typer.Option(help="The node agent's queue (default: remedy-node/<node>).")
    ] = None,
) -> None:
    """Start a remediation by hand, or join the one running on the node."""
    from datetime import UTC, datetime

    from remedy.models import Finding, Severity
    from remedy.names import node_task_queue as agent_queue
    from remedy.remediation import FindingReport
    from workers.client import connect, report_finding

    chosen = _runbook_or_exit(runbooks, runbook)
    finding = Finding(
        node=node,
        check="manual",
        reason="ManualTrigger",
        severity=Severity.CRITICAL,
        evidence=reason,
        observed_at=datetime.now(UTC),
    )

    async def start() -> str:
        handle = await report_finding(
            await connect(address),
            NodeRef(name=node, pool=pool),
            FindingReport(finding=finding, runbook=chosen),
            node_task_queue=node_task_queue or agent_queue(node),
            task_queue=task_queue,
        )
        return handle.id

    try:
        workflow_id = asyncio.run(start())
    except RPCError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{node}: {chosen.name} → {workflow_id}")


@app.command("resume-pool")
def resume_pool(
    pool: Annotated[str, typer.Argument(help="The node pool whose breaker to reset.")],
    address: AddressOption = "localhost:7233",
    by: ByOption = USER,
) -> None:
    """Close a pool's storm breaker: disruptive work resumes within the budget."""
    from remedy.budget import ResumeRequest
    from remedy.names import budget_workflow_id

    _signal(
        address,
        budget_workflow_id(pool),
        "resume",
        ResumeRequest(by=by),
        f"pool {pool}: no disruption budget",
    )
    typer.echo(f"pool {pool}: resume sent by {by}")


@app.command("resume-job")
def resume_job(
    job: Annotated[str, typer.Argument(help="The guarded job whose guard holds it.")],
    namespace: Annotated[str, typer.Option(help="The job's namespace.")] = "default",
    address: AddressOption = "localhost:7233",
    stop: Annotated[
        bool, typer.Option("--stop", help="Give up on the job instead of restarting it.")
    ] = False,
    by: ByOption = USER,
) -> None:
    """Let a job guard that holds a job for a human restart it (or stop, with --stop).
    Exit 2 when no guard runs for the job, or its guard holds nothing (a resume then would be
    ignored)."""
    from remedy.attribution.guard import GuardPhase, ResumeRequest
    from remedy.names import job_guard_workflow_id
    from workers.client import connect
    from workflows.job_guard import JobGuard

    workflow_id = job_guard_workflow_id(namespace, job)

    async def phase() -> GuardPhase:
        client = await connect(address)
        return await client.get_workflow_handle_for(JobGuard.run, workflow_id).query(JobGuard.phase)

    try:
        now = asyncio.run(phase())
    except RPCError as exc:
        typer.echo(f"error: job {namespace}/{job}: no running guard ({exc})", err=True)
        raise typer.Exit(2) from None
    if now is not GuardPhase.HELD:
        typer.echo(
            f"error: job {namespace}/{job} is {now.value}, not held: nothing to resume", err=True
        )
        raise typer.Exit(2)
    _signal(
        address,
        workflow_id,
        "resume",
        ResumeRequest(by=by, stop=stop),
        f"job {namespace}/{job}: no running guard",
    )
    typer.echo(f"job {namespace}/{job}: {'stop' if stop else 'resume'} sent by {by}")


def _runbooks_or_exit(folder: Path) -> RunbookSet:
    """The runbooks, all or nothing: a broken one is FILE:LINE: FIELD lines and exit 1."""
    try:
        return RunbookSet(load_runbooks([folder]))
    except RunbookError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(1) from None


def _attributor_or_exit(rules: Path | None) -> Attributor:
    """The attribution rules, all or nothing: a broken file is FILE:LINE: FIELD lines, exit 1."""
    from remedy.attribution.rules import Attributor, RulesError, load_rules

    try:
        return Attributor(load_rules(rules) if rules else None)
    except RulesError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None


def _runbook_or_exit(folder: Path, name: str) -> Runbook:
    try:
        return _runbooks_or_exit(folder).get(name)
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None


def _serve(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a long-lived process (agent, controller) until Ctrl-C, logging to stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def main() -> None:
    try:
        app()
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    # The Temporal core's native threads can outlive asyncio.run and crash interpreter
    # finalization ("PyGILState_Release ... finalizing"); everything is shut down and flushed
    # by now, so skip finalization instead of turning a clean exit into a core dump.
    sys.stdout.flush()
    sys.stderr.flush()
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    os._exit(code or 0)
