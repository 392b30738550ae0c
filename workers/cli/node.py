"""`remedy probe` and `remedy agent`: what runs on a GPU node (registered in __init__.py)."""

from __future__ import annotations

import shlex
import socket
from pathlib import Path
from typing import Annotated

import typer

from adapters.host.kernel_sources import kernel_log_source
from adapters.host.load_test import LoadTestConfig
from adapters.host.local import DEFAULT_REBOOT_COMMAND, DEFAULT_STATE_DIR, LocalHost, boot_time
from adapters.host.nics import SysfsNics
from adapters.sim import FAULTS, SimFleet
from remedy.host import NodeHost
from remedy.liveness import AGENT_HEARTBEAT
from remedy.models import NodeRef
from remedy.pod_resources import KUBELET_SOCKET
from remedy.probe import ProbeConfig, probe_node
from remedy.probe.diagnose import deep_diagnose
from remedy.probe.throughput import REFERENCE_FILE, load_references
from remedy.probe.xid_dedup import XidDedup
from remedy.xid.kernel_log import KernelLogSource
from workers.cli.common import (
    RedactPatternsOption,
    kube_api_or_exit,
    redactor_or_exit,
    runbooks_or_exit,
    serve,
)
from workers.cli.connection import temporal
from workers.cli.exits import BAD_INPUT
from workers.cli.options import (
    DEFAULT_RUNBOOKS,
    AddressOption,
    KernelLogOption,
    KubeconfigOption,
    KubeTimeoutOption,
    MetricsOption,
    RunbooksOption,
)

ExpectedGpusOption = Annotated[int | None, typer.Option(help="GPUs this node should have.")]
ExpectedNicsOption = Annotated[int | None, typer.Option(help="RDMA devices it should have.")]
NicRateOption = Annotated[float | None, typer.Option(help="Expected port rate, Gb/s.")]
DcgmHostOption = Annotated[
    str,
    typer.Option(
        help="The DCGM host engine for `dcgmi --host` (e.g. $(NODE_IP):5555 for the GPU "
        "operator's nvidia-dcgm); empty: localhost."
    ),
]
RebootCommandOption = Annotated[
    str,
    typer.Option(
        help="The command line that reboots this node (split like a shell would). In a "
        "container, reach the host: 'nsenter --target 1 --mount --uts --ipc --net --pid "
        "-- systemctl reboot' (needs hostPID, root, SYS_ADMIN, SYS_PTRACE, SYS_CHROOT, "
        "SYS_BOOT: `remedy render-manifests --allow-reboot`)."
    ),
]


def probe(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    node: Annotated[str, typer.Option(help="Node name in the report.")] = socket.gethostname(),
    expected_gpus: ExpectedGpusOption = None,
    expected_nics: ExpectedNicsOption = None,
    nic_rate: NicRateOption = None,
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
) -> None:
    """Probe this node. Exit 0 healthy, 1 unhealthy, 2 could not probe."""
    config = ProbeConfig(
        expected_gpus=expected_gpus,
        check_timeout_s=timeout,
        nics=SysfsNics() if expected_nics else None,
        expected_nics=expected_nics,
        expected_nic_rate_gbps=nic_rate,
        kernel_log=kernel_log_or_exit(kernel_log, None),
        not_before=boot_time(),
    )
    if simulate and simulate != "none" and simulate not in FAULTS:
        typer.echo(
            f"error: --simulate: unknown fault {simulate!r}; known: none, "
            f"{', '.join(sorted(FAULTS))}",
            err=True,
        )
        raise typer.Exit(BAD_INPUT)
    if simulate:
        fleet = SimFleet(nodes=1, name_prefix=node)
        node = next(iter(fleet.nodes))
        if simulate != "none":
            fleet.inject(node, simulate, 0)
        host: NodeHost = fleet.host(node)
        config = host.probe_config
    else:
        host = LocalHost(node, config)  # resets and reboots stay refused: it only reads
    if deep:
        report = deep_diagnose(host, [], config)
    else:
        report = probe_node(node, host.nvml(), config)
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


def kernel_log_or_exit(spec: str, cursor: Path | None) -> KernelLogSource | None:
    try:
        return kernel_log_source(spec, cursor)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kernel-log") from None


def command_line(text: str) -> tuple[str, ...]:
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise typer.BadParameter(f"{text!r}: {exc}", param_hint="--reboot-command") from None
    if not words:
        raise typer.BadParameter("empty", param_hint="--reboot-command")
    return words


def agent(
    node: Annotated[str, typer.Option(help="This node's name (the Kubernetes node).")],
    address: AddressOption = None,
    pool: Annotated[str, typer.Option(help="Node pool.")] = "default",
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    interval: Annotated[float, typer.Option(help="Seconds between probes.")] = 30.0,
    heartbeat_s: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds between writes of unchanged node conditions (a change is written at "
            "once): the heartbeat the controller's --agent-silent-after measures.",
        ),
    ] = AGENT_HEARTBEAT.total_seconds(),
    expected_gpus: ExpectedGpusOption = None,
    expected_nics: ExpectedNicsOption = None,
    nic_rate: NicRateOption = None,
    kernel_log: KernelLogOption = "auto",
    cursor: Annotated[
        Path | None, typer.Option(help="Where to keep the kernel-log cursor.")
    ] = None,
    allow_reset: Annotated[bool, typer.Option(help="Allow nvidia-smi --gpu-reset.")] = False,
    allow_reboot: Annotated[bool, typer.Option(help="Allow rebooting this node.")] = False,
    reboot_command: RebootCommandOption = DEFAULT_REBOOT_COMMAND,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Say what each reset and reboot would do; do nothing (the controller's "
            "--dry-run covers the cluster side only)."
        ),
    ] = False,
    state_dir: Annotated[
        Path,
        typer.Option(
            help="Where the agent keeps what it did (each reset and reboot, by key), on the "
            "node's own disk: it must outlive the agent and a reboot."
        ),
    ] = DEFAULT_STATE_DIR,
    kubernetes: Annotated[
        bool,
        typer.Option(
            help="Publish node conditions to Kubernetes (in-cluster config or --kubeconfig)."
        ),
    ] = False,
    kubeconfig: KubeconfigOption = None,
    kube_timeout: KubeTimeoutOption = None,
    self_cordon: Annotated[
        bool,
        typer.Option(
            help="With --kubernetes: cordon this node at once for a fault whose runbook cordons "
            "(as its ladder would, a report later), unless the published breaker holds cordons."
        ),
    ] = True,
    namespace: Annotated[
        str,
        typer.Option(envvar="POD_NAMESPACE", help="remedy's namespace: its published breakers."),
    ] = "remedy",
    metrics_bind: MetricsOption = None,
    dcgm_level: Annotated[
        int,
        typer.Option(
            min=1, max=4, help="The deep diagnose's `dcgmi diag -r` level, where DCGM is present."
        ),
    ] = 2,
    dcgm_host: DcgmHostOption = "",
    diagnose_timeout: Annotated[
        float, typer.Option(help="Seconds a DCGM diagnostic may take before it is killed.")
    ] = 600.0,
    gpu_reference: Annotated[
        Path,
        typer.Option(
            help="Throughput reference per GPU model for the built-in load test (YAML; the "
            "shipped one has H100, H200, A100, B200)."
        ),
    ] = REFERENCE_FILE,
    redact_patterns: RedactPatternsOption = None,
    pod_resources: Annotated[
        str,
        typer.Option(
            help="The kubelet's pod-resources socket: which pod uses which GPU, published on "
            "the node for GPU-scoped rungs and active checks (with --kubernetes; empty: not read)."
        ),
    ] = KUBELET_SOCKET,
) -> None:
    """Run the node agent: host-local activities on this node's queue, and the probe loop."""
    from adapters.host.pod_resources import KubeletPodResources, device_ids
    from adapters.kubernetes.cluster import kubernetes_cluster
    from adapters.kubernetes.marks import KubernetesNodeMarks
    from adapters.kubernetes.nodes import NodeApi
    from adapters.kubernetes.objects import AGENT_MANAGER
    from remedy.cluster import OwnNode
    from remedy.pod_resources import GpuUseReporter
    from workers.agent import AgentConfig, NodeAgent
    from workers.client import connect_with, metrics_runtime

    loaded = runbooks_or_exit(runbooks)
    redactor = redactor_or_exit(redact_patterns)
    api = kube_api_or_exit(kubeconfig, kube_timeout) if kubernetes else None
    try:
        load_references(gpu_reference)
    except (OSError, ValueError) as exc:
        typer.echo(f"error: --gpu-reference {gpu_reference}: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    config = ProbeConfig(
        expected_gpus=expected_gpus,
        nics=SysfsNics() if expected_nics else None,
        expected_nics=expected_nics,
        expected_nic_rate_gbps=nic_rate,
        kernel_log=kernel_log_or_exit(kernel_log, cursor),
        not_before=boot_time(),
        xids_seen=XidDedup(),  # NVML's events and the kernel log: one Xid counts once
    )
    host = LocalHost(
        node,
        config,
        allow_reset=allow_reset,
        allow_reboot=allow_reboot,
        reboot_command=command_line(reboot_command),
        state_dir=state_dir,
        dry_run=dry_run,
        load_test=LoadTestConfig(
            dcgm_level=dcgm_level,
            dcgm_host=dcgm_host,
            dcgm_timeout_s=diagnose_timeout,
            references=gpu_reference,
        ),
    )

    async def main() -> None:
        client = await connect_with(
            temporal(address),
            "agent",
            runtime=metrics_runtime(metrics_bind, "agent") if metrics_bind else None,
        )
        marks = KubernetesNodeMarks(NodeApi(api, field_manager=AGENT_MANAGER)) if api else None
        own = None
        if api and self_cordon:  # the same cordon as the controller's, written as the agent
            on = kubernetes_cluster(api, field_manager=AGENT_MANAGER, namespace=namespace)
            own = OwnNode(on.control, on.breakers) if on.breakers else None
        gpu_use = None
        if marks is not None and pod_resources:
            source = KubeletPodResources(pod_resources)
            gpu_use = GpuUseReporter(node, source, lambda: device_ids(host.nvml()), marks)
        await NodeAgent(
            client,
            host,
            loaded,
            marks,
            AgentConfig(
                node=NodeRef(name=node, pool=pool),
                interval_s=interval,
                heartbeat_s=heartbeat_s,
                redactor=redactor,
                self_cordon=self_cordon,
            ),
            gpu_use=gpu_use,
            own=own,
        ).run()

    serve(main)
