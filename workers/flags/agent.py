"""`remedy agent`'s flags, declared once: the command parses them (workers/cli/node.py) and the
manifests' check reads an agent's DaemonSet with them (workers/manifests/needs.py); the host's
options here are `probe`'s and `doctor`'s too."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict

from adapters.host.local import DEFAULT_REBOOT_COMMAND, DEFAULT_STATE_DIR
from remedy.detection.pod_resources import KUBELET_SOCKET
from remedy.detection.probe.throughput import REFERENCE_FILE
from remedy.scan.liveness import AGENT_HEARTBEAT
from workers.flags.options import (
    DEFAULT_RUNBOOKS,
    AddressOption,
    KernelLogOption,
    KubeconfigOption,
    KubeTimeoutOption,
    MetricsOption,
    RedactPatternsOption,
    RunbooksOption,
)

ExpectedGpusOption = Annotated[int | None, typer.Option(help="GPUs this node should have.")]
ExpectedNicsOption = Annotated[int | None, typer.Option(help="RDMA devices it should have.")]
NicRateOption = Annotated[float | None, typer.Option(help="Expected port rate, Gb/s.")]
NicExcludeOption = Annotated[
    str,
    typer.Option(
        help="RDMA devices the NIC checks leave out (and do not count), comma-separated, e.g. "
        "mlx5_0,mlx5_1: ports whose counters the firmware restricts (ACCESS_REG failures on "
        "a DGX's internal PFs), or not the job's fabric."
    ),
]
DcgmHostOption = Annotated[
    str,
    typer.Option(
        help="The DCGM host engine for `dcgmi --host` (e.g. $(NODE_IP):5555 for the GPU "
        "operator's nvidia-dcgm); empty: localhost."
    ),
]
FabricManagerOption = Annotated[
    str,
    typer.Option(
        help="On an NVSwitch system, the Fabric Manager unit to watch through systemd "
        "(nvidia-fabricmanager on a host-driver install; the agent must reach the host's "
        "systemd); empty: not watched (the GPU operator runs it in its driver container, "
        "where the GPUs' fabric state is the witness)."
    ),
]
DcgmHealthOption = Annotated[
    bool,
    typer.Option(
        help="Read DCGM's background health watches on every probe (`dcgmi health -c -j`, at "
        "--dcgm-host); where none are set, set them all once (`dcgmi health -s a`)."
    ),
]
DcgmExporterOption = Annotated[
    str,
    typer.Option(
        help="dcgm-exporter's metrics URL (e.g. http://$(NODE_IP):9400/metrics): its Xid gauge "
        "DCGM_FI_DEV_XID_ERRORS, read as each GPU's last Xid, for nodes whose kernel log "
        "remedy cannot read; empty: not read."
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


class AgentFlags(BaseModel):
    """`remedy agent`'s options, in the order its help lists them."""

    model_config = ConfigDict(frozen=True)

    node: Annotated[str, typer.Option(help="This node's name (the Kubernetes node).")]
    address: AddressOption = None
    pool: Annotated[str, typer.Option(help="Node pool.")] = "default"
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS
    interval: Annotated[float, typer.Option(help="Seconds between probes.")] = 30.0
    heartbeat_s: Annotated[
        float,
        typer.Option(
            min=1,
            help="Seconds between writes of unchanged node conditions (a change is written at "
            "once): the heartbeat the controller's --agent-silent-after measures.",
        ),
    ] = AGENT_HEARTBEAT.total_seconds()
    expected_gpus: ExpectedGpusOption = None
    expected_nics: ExpectedNicsOption = None
    nic_rate: NicRateOption = None
    nic_exclude: NicExcludeOption = ""
    kernel_log: KernelLogOption = "auto"
    cursor: Annotated[Path | None, typer.Option(help="Where to keep the kernel-log cursor.")] = None
    allow_reset: Annotated[bool, typer.Option(help="Allow nvidia-smi --gpu-reset.")] = False
    allow_reboot: Annotated[bool, typer.Option(help="Allow rebooting this node.")] = False
    reboot_command: RebootCommandOption = DEFAULT_REBOOT_COMMAND
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Say what each reset and reboot would do; do nothing (the controller's "
            "--dry-run covers the cluster side only)."
        ),
    ] = False
    state_dir: Annotated[
        Path,
        typer.Option(
            help="Where the agent keeps what it did (each reset and reboot, by key), on the "
            "node's own disk: it must outlive the agent and a reboot."
        ),
    ] = DEFAULT_STATE_DIR
    kubernetes: Annotated[
        bool,
        typer.Option(
            help="Publish node conditions to Kubernetes (in-cluster config or --kubeconfig)."
        ),
    ] = False
    kubeconfig: KubeconfigOption = None
    kube_timeout: KubeTimeoutOption = None
    self_cordon: Annotated[
        bool,
        typer.Option(
            help="With --kubernetes: cordon this node at once for a fault whose runbook cordons "
            "(as its ladder would, a report later), unless the published breaker holds cordons."
        ),
    ] = True
    namespace: Annotated[
        str,
        typer.Option(envvar="POD_NAMESPACE", help="remedy's namespace: its published breakers."),
    ] = "remedy"
    metrics_bind: MetricsOption = None
    dcgm_level: Annotated[
        int,
        typer.Option(
            min=1, max=4, help="The deep diagnose's `dcgmi diag -r` level, where DCGM is present."
        ),
    ] = 2
    dcgm_host: DcgmHostOption = ""
    fabric_manager: FabricManagerOption = ""
    dcgm_health: DcgmHealthOption = False
    dcgm_exporter: DcgmExporterOption = ""
    diagnose_timeout: Annotated[
        float, typer.Option(help="Seconds a DCGM diagnostic may take before it is killed.")
    ] = 600.0
    gpu_reference: Annotated[
        Path,
        typer.Option(
            help="Throughput reference per GPU model for the built-in load test (YAML; the "
            "shipped one has H100, H200, A100, B200)."
        ),
    ] = REFERENCE_FILE
    redact_patterns: RedactPatternsOption = None
    pod_resources: Annotated[
        str,
        typer.Option(
            help="The kubelet's pod-resources socket: which pod uses which GPU, published on "
            "the node for GPU-scoped rungs and active checks (with --kubernetes; empty: not read)."
        ),
    ] = KUBELET_SOCKET
