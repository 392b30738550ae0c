"""`remedy probe` and `remedy agent`: what runs on a GPU node (registered in __init__.py). The
agent's flags: workers/flags/agent.py; its process: workers/serving.py; its host and what it
publishes through: the composition root, workers/providers."""

from __future__ import annotations

import socket
from typing import Annotated, Any

import typer

from remedy.detection.host import NodeHost
from remedy.detection.npd import npd_line
from remedy.detection.probe import probe_node
from remedy.detection.probe.diagnose import deep_diagnose
from workers.cli.common import redactor_or_exit, runbooks_or_exit, serve, settings_or_exit
from workers.cli.connection import temporal
from workers.cli.exits import BAD_INPUT
from workers.flags import command
from workers.flags.agent import (
    AgentFlags,
    DcgmExporterOption,
    DcgmHealthOption,
    ExpectedGpusOption,
    ExpectedNicsOption,
    FabricManagerOption,
    NicExcludeOption,
    NicRateOption,
)
from workers.flags.options import KernelLogOption


def probe(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    node: Annotated[str, typer.Option(help="Node name in the report.")] = socket.gethostname(),
    expected_gpus: ExpectedGpusOption = None,
    expected_nics: ExpectedNicsOption = None,
    nic_rate: NicRateOption = None,
    fabric_manager: FabricManagerOption = "",
    dcgm_health: DcgmHealthOption = False,
    dcgm_exporter: DcgmExporterOption = "",
    nic_exclude: NicExcludeOption = "",
    timeout: Annotated[float, typer.Option(help="Seconds each check may take.")] = 5.0,
    kernel_log: KernelLogOption = "auto",
    simulate: Annotated[
        str | None,
        typer.Option(help="Probe a simulated 8-GPU node with this fault instead (e.g. ecc_dbe)."),
    ] = None,
    deep: Annotated[
        bool,
        typer.Option(
            help="The deep diagnose: the probe, then sustained load on every GPU (what the "
            "agent runs for a ladder's diagnose and for admission)."
        ),
    ] = False,
    npd: Annotated[
        bool,
        typer.Option(
            "--npd",
            help="Print one line of at most 80 characters, for node-problem-detector's custom "
            "plugin (its exit codes are the probe's: examples/npd/remedy-probe.json).",
        ),
    ] = False,
) -> None:
    """Probe this node. Exit 0 healthy, 1 unhealthy, 2 could not probe."""
    from workers.providers.sim import FAULTS, SimProvider, SimSettings

    if npd and as_json:
        typer.echo("error: --npd and --json: one output at a time", err=True)
        raise typer.Exit(BAD_INPUT)
    if simulate and simulate != "none" and simulate not in FAULTS:
        typer.echo(
            f"error: --simulate: unknown fault {simulate!r}; known: none, "
            f"{', '.join(sorted(FAULTS))}",
            err=True,
        )
        raise typer.Exit(BAD_INPUT)
    if simulate:
        fleet = SimProvider(SimSettings(nodes=1, name_prefix=node)).fleet
        node = next(iter(fleet.nodes))
        # The twin's DCGM and exporter answer where asked (the exporter's URL is not fetched).
        fleet.nodes[node].dcgm_health = dcgm_health
        fleet.nodes[node].dcgm_exporter = bool(dcgm_exporter)
        if simulate != "none":
            fleet.inject(node, simulate, 0)
        host: NodeHost = fleet.host(node)
    else:  # resets and reboots stay refused: it only reads
        host = local_host_or_exit(
            node=node,
            expected_gpus=expected_gpus,
            expected_nics=expected_nics,
            nic_rate=nic_rate,
            fabric_manager=fabric_manager,
            dcgm_health=dcgm_health,
            dcgm_exporter=dcgm_exporter,
            nic_exclude=nic_exclude,
            timeout=timeout,
            kernel_log=kernel_log,
        )
    config = host.probe_config
    if deep:
        report = deep_diagnose(host, [], config)
    else:
        report = probe_node(node, host.nvml(), config)
    if npd:
        typer.echo(npd_line(report))
    elif as_json:
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


def local_host_or_exit(**flags: Any) -> NodeHost:
    """This machine from the host's flags (``HostSettings``' fields); a bad one: one line
    naming it, and exit 1."""
    from workers.providers.root import HostSettings, local_host

    return local_host(settings_or_exit(HostSettings, **flags))


# What of the agent's flags goes to its host, and to Kubernetes with --kubernetes (not its
# --dry-run: that one is the host's).
HOST_FLAGS = {
    "node", "expected_gpus", "expected_nics", "nic_rate", "nic_exclude", "kernel_log", "cursor",
    "allow_reset",
    "allow_reboot", "reboot_command", "dry_run", "state_dir", "dcgm_level", "dcgm_host",
    "diagnose_timeout", "gpu_reference", "fabric_manager", "dcgm_health", "dcgm_exporter",
}  # fmt: skip
KUBERNETES_FLAGS = {"kubeconfig", "kube_timeout", "namespace", "self_cordon", "pod_resources"}


def _agent(flags: AgentFlags) -> None:
    """Run the node agent: host-local activities on this node's queue, and the probe loop."""
    from remedy.core.models import NodeRef
    from workers.agent import AgentConfig
    from workers.providers.root import HostSettings, KubernetesSettings
    from workers.serving import AgentSettings, run_agent

    runbooks = runbooks_or_exit(flags.runbooks)
    redactor = redactor_or_exit(flags.redact_patterns)
    node = settings_or_exit(NodeRef, {"name": "node"}, name=flags.node, pool=flags.pool)
    host = flags.model_dump(include=HOST_FLAGS)
    kubernetes = flags.model_dump(include=KUBERNETES_FLAGS)
    settings = AgentSettings(
        host=settings_or_exit(HostSettings, **host, watch_xids=True),
        provider=settings_or_exit(KubernetesSettings, **kubernetes) if flags.kubernetes else None,
        connection=temporal(flags.address),
        runbooks=runbooks,
        config=AgentConfig(
            node=node,
            interval_s=flags.interval,
            heartbeat_s=flags.heartbeat_s,
            redactor=redactor,
            self_cordon=flags.self_cordon,
        ),
        metrics_bind=flags.metrics_bind,
    )
    serve(lambda: run_agent(settings))


agent = command(AgentFlags, _agent, "agent")
