"""The options several `remedy` commands take, each declared once, with their defaults. An option
whose help says something different per command (the demo's --address) stays with it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
USER = os.environ.get("USER", "operator")

AddressOption = Annotated[
    str | None,
    typer.Option(
        help="Temporal server host:port (env TEMPORAL_ADDRESS, else the profile's; default: "
        "localhost:7233)."
    ),
]
RunbooksOption = Annotated[Path, typer.Option(help="Runbook folder.")]
TaskQueueOption = Annotated[str, typer.Option(help="The controller's task queue.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
ByOption = Annotated[str, typer.Option(help="Who does it (recorded in the workflow).")]
KubeconfigOption = Annotated[
    str | None,
    typer.Option(help="Kubeconfig file (default: in-cluster config, then ~/.kube/config)."),
]
KubeTimeoutOption = Annotated[
    float | None,
    typer.Option(
        min=0.1,
        help="Seconds any Kubernetes API call waits for each answer from the server (default "
        "30; connecting, at most 5): a stuck connection fails and is retried.",
    ),
]
KernelLogOption = Annotated[
    str,
    typer.Option(
        help="Where to read the kernel log for Xids, beside NVML's events: auto (/dev/kmsg if "
        "readable, else the journal, else /var/log/kern.log, else /var/log/messages), kmsg, "
        "journal, journal:DIR (a host's journal mounted here), file:PATH, or none."
    ),
]
MetricsOption = Annotated[
    str | None,
    typer.Option(
        help="Serve Prometheus metrics on this host:port at /metrics (e.g. 0.0.0.0:9464)."
    ),
]
