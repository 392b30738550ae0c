"""`remedy controller` and `remedy demo`: the controller worker, wired to a Kubernetes cluster
or to a simulated fleet (registered in __init__.py)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from contract.names import CONTROLLER_TASK_QUEUE
from remedy.liveness import (
    AGENT_HEARTBEAT,
    MIN_SILENT_HEARTBEATS,
    SILENT_HEARTBEATS,
    silent_after_problem,
)
from remedy.runbook import RunbookError
from remedy.worker_stall import stall_after_problem
from workers.cli import active_checks as checks
from workers.cli import drain
from workers.cli.common import (
    RedactPatternsOption,
    attributor_or_exit,
    kube_api_or_exit,
    on_temporal,
    redactor_or_exit,
    runbooks_or_exit,
    serve,
)
from workers.cli.connection import temporal
from workers.cli.door import KeyringOption, PoolRunbooksOption, SealKeyOption, door_or_exit
from workers.cli.exits import BAD_INPUT
from workers.cli.options import (
    DEFAULT_RUNBOOKS,
    STALL_AFTER_S,
    AddressOption,
    DemoMetricsOption,
    KubeconfigOption,
    KubeTimeoutOption,
    MetricsOption,
    RunbooksOption,
    StallAfterOption,
    WorkflowCacheOption,
)
from workers.cli.signing import keyring_or_exit


def controller(
    address: AddressOption = None,
    kubeconfig: KubeconfigOption = None,
    kube_timeout: KubeTimeoutOption = None,
    namespace: Annotated[
        str, typer.Option(envvar="POD_NAMESPACE", help="remedy's namespace: its breakers.")
    ] = "remedy",
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
    drain_delete_emptydir_data: drain.DeleteEmptydirOption = False,
    drain_force: drain.ForceOption = False,
    drain_skip_wait_for_delete_timeout: drain.SkipWaitOption = 60.0,
    drain_mode: drain.ModeOption = None,
    drain_delete_after: drain.DeleteAfterOption = 600.0,
    drain_delete_grace_max: drain.DeleteGraceOption = None,
    max_disruption: Annotated[
        str,
        typer.Option(
            help="Nodes of a pool disrupted at once: a count (2), a share (20%) or all-but-N."
        ),
    ] = "20%",
    max_gpus_out: Annotated[
        str | None,
        typer.Option(
            help="GPUs of a pool out at once: a count (4), a share (10%) or all-but-N. With it, "
            "a GPU-scoped rung's lease takes its GPU, not its node. Default: no GPU cap.",
        ),
    ] = None,
    storm_share: Annotated[
        float,
        typer.Option(
            help="Share of a pool unhealthy within 10 minutes that holds cordons and disruptive "
            "work (the quarantine breaker), and share of the fleet (else of a pool) whose agents "
            "silent at once start no AgentSilent ladder."
        ),
    ] = 0.2,
    cluster_storm_share: Annotated[
        float,
        typer.Option(
            min=0,
            help="Share of the whole fleet unhealthy within 10 minutes, across pools, that holds "
            "cordons everywhere (`remedy resume-pool _cluster` closes it); 0: no cluster-wide "
            "breaker.",
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
    agent_heartbeat_s: Annotated[
        float,
        typer.Option(
            min=1,
            help="The agents' --heartbeat-s: how often each rewrites unchanged conditions.",
        ),
    ] = AGENT_HEARTBEAT.total_seconds(),
    agent_silent_after: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Seconds, on the controller's clock, that a node agent's heartbeat (its "
            "conditions' lastHeartbeatTime) may stay unchanged before the scan starts an "
            f"AgentSilent ladder; at least "
            f"{MIN_SILENT_HEARTBEATS} heartbeats (default: {SILENT_HEARTBEATS} × "
            "--agent-heartbeat-s).",
            show_default=False,
        ),
    ] = None,
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
    active_check_every: checks.EveryOption = "1h",
    active_check_interval: checks.IntervalOption = "1d",
    active_check_max_age: checks.MaxAgeOption = "7d",
    active_check_pool: checks.PoolOption = None,
    active_check_idle_at_once: checks.IdleAtOnceOption = None,
    metrics_bind: MetricsOption = None,
    workflow_cache: WorkflowCacheOption = None,
    stall_after: StallAfterOption = STALL_AFTER_S,
    redact_patterns: RedactPatternsOption = None,
    keyring: KeyringOption = None,
    seal_key_file: SealKeyOption = None,
    pool_runbooks: PoolRunbooksOption = None,
) -> None:
    """Run the controller worker against a Kubernetes cluster."""
    from concurrent.futures import ThreadPoolExecutor

    from adapters.kubernetes.cluster import kubernetes_cluster
    from adapters.kubernetes.jobs import KubernetesJobs
    from remedy.attribution.guard import GuardPolicy
    from remedy.budget import BudgetPolicy
    from remedy.fleet import ScanInput
    from remedy.hardware import BlocklistPolicy
    from workers.client import connect_with, ensure_search_attributes, metrics_runtime
    from workers.controller import WorkerTuning, controller_worker
    from workers.keyring_file import KeyringFile
    from workers.schedules import ensure_fleet_scan, ensure_pool_checks
    from workers.stall_watch import EXIT_STALLED, WorkerStalled

    heartbeat = timedelta(seconds=agent_heartbeat_s)
    silent_after = (
        timedelta(seconds=agent_silent_after)
        if agent_silent_after is not None
        else SILENT_HEARTBEATS * heartbeat
    )
    if problem := silent_after_problem(silent_after, heartbeat):
        typer.echo(f"error: --agent-silent-after: {problem}", err=True)
        raise typer.Exit(BAD_INPUT)
    if problem := stall_after_problem(timedelta(seconds=stall_after)):
        typer.echo(f"error: --stall-after: {problem}", err=True)
        raise typer.Exit(BAD_INPUT)
    loaded = runbooks_or_exit(runbooks)
    attributor = attributor_or_exit(job_rules)
    redactor = redactor_or_exit(redact_patterns)
    operators = keyring_or_exit(keyring)  # a broken file stops the start; later, fails closed
    door = door_or_exit(seal_key_file, pool_runbooks)
    drain_rules, drain_modes = drain.drain_settings(
        drain_delete_emptydir_data,
        drain_force,
        drain_skip_wait_for_delete_timeout,
        drain_mode,
        drain_delete_after,
        drain_delete_grace_max,
    )
    try:
        policy = BudgetPolicy(
            max_disruption=max_disruption,
            max_gpus_out=max_gpus_out,
            storm_share=storm_share,
            cluster_share=cluster_storm_share or None,
        )
        blocklist = BlocklistPolicy(
            max_incidents=blocklist_incidents, window=timedelta(days=blocklist_days)
        )
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            field = {
                "max_incidents": "blocklist_incidents",
                "window": "blocklist_days",
                "cluster_share": "cluster_storm_share",
            }.get(field, field)  # the policy's field → the flag that set it
            typer.echo(
                f"error: --{field.replace('_', '-')}: {error['msg'].removeprefix('Value error, ')}",
                err=True,
            )
        raise typer.Exit(BAD_INPUT) from None
    active = checks.active_check_policies(
        active_check_every,
        active_check_interval,
        active_check_max_age,
        active_check_pool,
        active_check_idle_at_once or max_disruption,  # idle checks: the budget's share
    )
    api = kube_api_or_exit(kubeconfig, kube_timeout)
    try:
        cluster = kubernetes_cluster(
            api,
            dry_run=dry_run,
            replacer=replace_provider,
            checkpoint_grace_s=checkpoint_grace,
            drain_rules=drain_rules,
            drain_modes=drain_modes,
            namespace=namespace,
        )
    except ValueError as exc:  # an unknown replace provider
        typer.echo(f"error: --replace-provider: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    jobs = KubernetesJobs(api, dry_run=dry_run) if watch_jobs else None
    scan = ScanInput(
        watch_jobs=watch_jobs,
        guard_policy=GuardPolicy(max_platform_restarts=max_job_restarts),
        agent_silent_after=silent_after,
        silence_share=storm_share,
    )

    tuning = WorkerTuning()
    if workflow_cache:
        tuning = WorkerTuning(max_cached_workflows=workflow_cache)

    async def main() -> None:
        client = await connect_with(
            temporal(address),
            "controller",
            runtime=metrics_runtime(metrics_bind, "controller") if metrics_bind else None,
        )
        await ensure_search_attributes(client)
        if scan_every > 0:
            await ensure_fleet_scan(
                client, timedelta(seconds=scan_every), CONTROLLER_TASK_QUEUE, scan
            )
        if active is not None:
            await ensure_pool_checks(client, cluster.fleet, *active, CONTROLLER_TASK_QUEUE)
        with ThreadPoolExecutor(max_workers=32) as executor:
            workers = controller_worker(
                client,
                cluster,
                executor,
                policy=policy,
                runbooks=loaded,
                blocklist=blocklist,
                jobs=jobs,
                attributor=attributor,
                redactor=redactor,
                keyring=KeyringFile(keyring) if keyring and operators else None,
                tuning=tuning,
                door=door,
            )
            try:
                await workers.run(timedelta(seconds=stall_after) if stall_after else None)
            except WorkerStalled as stalled:  # a fresh process takes over every ladder
                typer.echo(f"error: {stalled}; exiting for a fresh start", err=True)
                raise typer.Exit(EXIT_STALLED) from None

    serve(main)


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
    db: Annotated[
        Path,
        typer.Option(
            help="SQLite file of the dev server: a fresh one each run, the last run's kept "
            "as NAME.previous.sqlite."
        ),
    ] = Path(".demo/temporal.sqlite"),
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Go on with the last run's --db and its workflows (ladders, leases, holds) "
            "instead of a fresh one.",
        ),
    ] = False,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    shared_runbooks: Annotated[
        Path | None,
        typer.Option(
            help="Runbooks the shared inference node's agent loads beside --runbooks (default: "
            "examples/runbooks, whose inference-gpu-ecc takes out only the faulty GPU)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the fault injector.")] = 1,
    address: Annotated[
        str | None,
        typer.Option(
            help="Use this Temporal server (host:port) instead of starting the dev server; "
            "the rest of the connection as for any command (`remedy --help`)."
        ),
    ] = None,
    metrics_bind: DemoMetricsOption = None,
    active_check_every: checks.EveryOption = "15s",
    active_check_interval: checks.IntervalOption = "1m",
    active_check_max_age: checks.MaxAgeOption = "10m",
) -> None:
    """Run the embedded default: dev Temporal server + Web UI + worker + a simulated GPU fleet."""
    from workers.demo import PortInUse, run_demo_on, run_embedded_demo
    from workers.demo_config import EXAMPLE_RUNBOOKS, DemoConfig

    if resume and address:
        typer.echo(
            "error: --resume is for the embedded dev server; the server at --address keeps "
            "its history anyway",
            err=True,
        )
        raise typer.Exit(BAD_INPUT)

    active = checks.active_check_policies(
        active_check_every, active_check_interval, active_check_max_age, None
    )

    config = DemoConfig(
        nodes=nodes,
        gpus_per_node=gpus,
        fault_every_s=fault_every,
        speedup=speedup,
        duration_s=duration,
        seed=seed,
        runbooks=runbooks,
        shared_runbooks=shared_runbooks or EXAMPLE_RUNBOOKS,
        # Wall time, like the demo's: a busy node waits a lease half a minute, not half an hour.
        active_checks=active[0].model_copy(update={"lease_wait": timedelta(seconds=30)})
        if active
        else None,
    )
    try:
        if address:
            on_temporal(run_demo_on(temporal(address), config, metrics_bind=metrics_bind))
        else:
            asyncio.run(run_embedded_demo(config, port=port, ui_port=ui_port, db=db, resume=resume))
    except PortInUse as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except RunbookError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
