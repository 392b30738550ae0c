"""`remedy controller`'s flags, declared once as a model (workers/flags), and the settings they
make (workers/serving.py): everything checked and loaded here, so that a bad flag or a broken
file is one line naming it, and exit 1, before anything connects."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import BaseModel, ConfigDict

from remedy.attribution.guard import GuardPolicy
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.hardware import BlocklistPolicy
from remedy.scan.admission import AdmissionPolicy
from remedy.scan.fleet import ScanInput
from remedy.scan.liveness import (
    AGENT_HEARTBEAT,
    MIN_SILENT_HEARTBEATS,
    SILENT_HEARTBEATS,
    silent_after_problem,
)
from remedy.scan.worker_stall import stall_after_problem
from workers.cli import active_checks as checks
from workers.cli import drain
from workers.cli import fabric as fabric_flags
from workers.cli.common import (
    attributor_or_exit,
    redactor_or_exit,
    runbooks_or_exit,
    settings_or_exit,
)
from workers.cli.connection import temporal
from workers.cli.door import KeyringOption, PoolRunbooksOption, SealKeyOption, door_or_exit
from workers.cli.exits import BAD_INPUT
from workers.cli.signing import keyring_or_exit
from workers.flags.options import (
    DEFAULT_RUNBOOKS,
    STALL_AFTER_S,
    AddressOption,
    KubeconfigOption,
    KubeTimeoutOption,
    MetricsOption,
    RedactPatternsOption,
    StallAfterOption,
    WorkflowCacheOption,
)

if TYPE_CHECKING:
    from workers.serving import ControllerSettings

# The policies' fields that their flags name otherwise.
POLICY_FLAGS = {
    "max_incidents": "blocklist_incidents",
    "window": "blocklist_days",
    "cluster_share": "cluster_storm_share",
}


class ControllerFlags(BaseModel):
    """`remedy controller`'s options, in the order its help lists them."""

    model_config = ConfigDict(frozen=True)

    address: AddressOption = None
    kubeconfig: KubeconfigOption = None
    kube_timeout: KubeTimeoutOption = None
    namespace: Annotated[
        str, typer.Option(envvar="POD_NAMESPACE", help="remedy's namespace: its breakers.")
    ] = "remedy"
    dry_run: Annotated[
        bool, typer.Option(help="Record what each destructive action would do; change nothing.")
    ] = False
    replace_provider: Annotated[
        str,
        typer.Option(
            help="How nodes are replaced: auto (Karpenter if present), karpenter, plain, none."
        ),
    ] = "auto"
    checkpoint_grace: Annotated[
        float,
        typer.Option(help="Seconds a drain waits for GPU pods to checkpoint before evicting them."),
    ] = 0.0
    drain_delete_emptydir_data: drain.DeleteEmptydirOption = False
    drain_force: drain.ForceOption = False
    drain_skip_wait_for_delete_timeout: drain.SkipWaitOption = 60.0
    drain_mode: drain.ModeOption = None
    drain_delete_after: drain.DeleteAfterOption = 600.0
    drain_delete_grace_max: drain.DeleteGraceOption = None
    max_disruption: Annotated[
        str,
        typer.Option(
            help="Nodes of a pool disrupted at once: a count (2), a share (20%) or all-but-N."
        ),
    ] = "20%"
    max_gpus_out: Annotated[
        str | None,
        typer.Option(
            help="GPUs of a pool out at once: a count (4), a share (10%) or all-but-N. With it, "
            "a GPU-scoped rung's lease takes its GPU, not its node. Default: no GPU cap.",
        ),
    ] = None
    storm_share: Annotated[
        float,
        typer.Option(
            help="Share of a pool unhealthy within 10 minutes that holds cordons and disruptive "
            "work (the quarantine breaker), and share of the fleet (else of a pool) whose agents "
            "silent at once start no AgentSilent ladder."
        ),
    ] = 0.2
    cluster_storm_share: Annotated[
        float,
        typer.Option(
            min=0,
            help="Share of the whole fleet unhealthy within 10 minutes, across pools, that holds "
            "cordons everywhere (`remedy resume-pool _cluster` closes it); 0: no cluster-wide "
            "breaker.",
        ),
    ] = 0.2
    runbooks: Annotated[
        Path,
        typer.Option(
            help="Runbook folder, for ladders the controller starts itself (fleet scan, "
            "admission failures)."
        ),
    ] = DEFAULT_RUNBOOKS
    monitor_conditions: Annotated[
        list[str],
        typer.Option(
            help="A table of other monitors' node conditions to take as faults "
            "(node-problem-detector, the EKS node monitoring agent; examples/monitors/). "
            "Repeat for more.",
            metavar="FILE",
        ),
    ] = []
    scan_every: Annotated[
        float,
        typer.Option(min=0, help="Seconds between fleet scans (a Temporal Schedule); 0: no scan."),
    ] = 60.0
    agent_heartbeat_s: Annotated[
        float,
        typer.Option(
            min=1,
            help="The agents' --heartbeat-s: how often each rewrites unchanged conditions.",
        ),
    ] = AGENT_HEARTBEAT.total_seconds()
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
    ] = None
    blocklist_incidents: Annotated[
        int, typer.Option(help="Incidents on one GPU serial within the window that blocklist it.")
    ] = 3
    blocklist_days: Annotated[
        float, typer.Option(min=0.01, help="The blocklist's window, in days.")
    ] = 30.0
    watch_jobs: Annotated[
        bool,
        typer.Option(
            help="Guard jobs labelled remedy.io/guard=true: each scan hands their failed pods to "
            "a JobGuard."
        ),
    ] = True
    max_job_restarts: Annotated[
        int,
        typer.Option(
            min=0, help="Platform restarts of a guarded job before it is held for a human."
        ),
    ] = 5
    job_rules: Annotated[
        Path | None,
        typer.Option(help="Attribution rules replacing the shipped ones (see docs/jobs.md)."),
    ] = None
    active_check_every: checks.EveryOption = "1h"
    active_check_interval: checks.IntervalOption = "1d"
    active_check_max_age: checks.MaxAgeOption = "7d"
    active_check_pool: checks.PoolOption = None
    active_check_idle_at_once: checks.IdleAtOnceOption = None
    fabric_test: fabric_flags.TestOption = None
    fabric_deadline: fabric_flags.DeadlineOption = "10m"
    fabric_nccl_tests_image: fabric_flags.NcclImageOption = ""
    fabric_nvbandwidth_image: fabric_flags.NvbandwidthImageOption = ""
    fabric_perftest_image: fabric_flags.PerftestImageOption = ""
    fabric_rdma_device: fabric_flags.RdmaDeviceOption = "mlx5_0"
    fabric_port_rate: fabric_flags.PortRateOption = 0.0
    metrics_bind: MetricsOption = None
    workflow_cache: WorkflowCacheOption = None
    stall_after: StallAfterOption = STALL_AFTER_S
    redact_patterns: RedactPatternsOption = None
    keyring: KeyringOption = None
    seal_key_file: SealKeyOption = None
    pool_runbooks: PoolRunbooksOption = None

    def settings(self) -> ControllerSettings:
        """The controller's settings; a bad flag or file: one line naming it, and exit 1."""
        from workers.controller import WorkerTuning
        from workers.providers.root import KubernetesSettings
        from workers.serving import ControllerSettings

        silent_after = self._silent_after()
        stall_after = timedelta(seconds=self.stall_after)
        _check("--stall-after", stall_after_problem(stall_after))
        runbooks = runbooks_or_exit(self.runbooks)
        attributor = attributor_or_exit(self.job_rules)
        redactor = redactor_or_exit(self.redact_patterns)
        operators = keyring_or_exit(self.keyring)  # a broken file stops the start
        door = door_or_exit(self.seal_key_file, self.pool_runbooks)
        kubernetes = set(KubernetesSettings.model_fields) & set(type(self).model_fields)
        provider = settings_or_exit(
            KubernetesSettings,
            **{**self.model_dump(include=kubernetes), "drain_mode": self.drain_mode or []},
        )
        policy, blocklist = self._policies()
        images = {
            "nccl_tests": self.fabric_nccl_tests_image,
            "nvbandwidth": self.fabric_nvbandwidth_image,
            "perftest": self.fabric_perftest_image,
        }
        fabric = fabric_flags.fabric_policy(
            self.fabric_test, self.fabric_deadline, images, self.fabric_port_rate
        )
        active = checks.active_check_policies(
            self.active_check_every,
            self.active_check_interval,
            self.active_check_max_age,
            self.active_check_pool,
            self.active_check_idle_at_once or self.max_disruption,  # the budget's share
            fabric,
        )
        scan = ScanInput(
            admission=AdmissionPolicy(fabric=fabric),
            watch_jobs=self.watch_jobs,
            guard_policy=GuardPolicy(max_platform_restarts=self.max_job_restarts),
            agent_silent_after=silent_after,
            silence_share=self.storm_share,
        )
        cache = self.workflow_cache
        return ControllerSettings(
            provider=provider,
            connection=temporal(self.address),
            runbooks=runbooks,
            policy=policy,
            blocklist=blocklist,
            scan=scan,
            scan_every=timedelta(seconds=self.scan_every) if self.scan_every > 0 else None,
            active=active,
            attributor=attributor,
            redactor=redactor,
            keyring=self.keyring if self.keyring and operators else None,
            door=door,
            tuning=WorkerTuning(max_cached_workflows=cache) if cache else WorkerTuning(),
            stall_after=stall_after if self.stall_after else None,
            metrics_bind=self.metrics_bind,
        )

    def _silent_after(self) -> timedelta:
        """How long an agent may stay silent: at least two of its heartbeats."""
        heartbeat = timedelta(seconds=self.agent_heartbeat_s)
        silent_after = SILENT_HEARTBEATS * heartbeat
        if self.agent_silent_after is not None:
            silent_after = timedelta(seconds=self.agent_silent_after)
        _check("--agent-silent-after", silent_after_problem(silent_after, heartbeat))
        return silent_after

    def _policies(self) -> tuple[BudgetPolicy, BlocklistPolicy]:
        """The pools' disruption budget and the GPUs' blocklist."""
        policy = settings_or_exit(
            BudgetPolicy,
            POLICY_FLAGS,
            max_disruption=self.max_disruption,
            max_gpus_out=self.max_gpus_out,
            storm_share=self.storm_share,
            cluster_share=self.cluster_storm_share or None,
        )
        blocklist = settings_or_exit(
            BlocklistPolicy,
            POLICY_FLAGS,
            max_incidents=self.blocklist_incidents,
            window=timedelta(days=self.blocklist_days),
        )
        return policy, blocklist


def _check(flag: str, problem: str | None) -> None:
    if problem:
        typer.echo(f"error: {flag}: {problem}", err=True)
        raise typer.Exit(BAD_INPUT)
