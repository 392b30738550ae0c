"""The options several `remedy` commands take, each declared once, with their defaults. An option
whose help says something different per command (the demo's --address) stays with it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import typer

from remedy.scan.worker_stall import STALL_AFTER

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


# A Kubernetes node name: a DNS subdomain (RFC 1123), what every ladder and workflow id names.
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def node_name(value: str) -> str:
    """A node's name as Kubernetes allows it; anything else (empty, upper case, a space) is a
    usage error before the command connects or starts anything."""
    if len(value) > 253 or not _NODE_NAME.fullmatch(value):
        raise typer.BadParameter(
            f"{value!r} is not a node name (lower-case letters, digits, '-' and '.')"
        )
    return value


def operator_text_option(value: str) -> str:
    """What an operator typed, redacted (remedy/redaction/operator.py); a control character or
    a text over the limit is a usage error, exit 1."""
    from remedy.redaction import operator_text

    try:
        return operator_text(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _reason(value: str) -> str:
    if not value.strip():
        raise typer.BadParameter("empty: say why")
    return operator_text_option(value)


_BOUNDED = "one line, at most 500 characters; secrets in it are redacted"
WhyOption = Annotated[
    str, typer.Option(help=f"Why (recorded; {_BOUNDED}).", callback=operator_text_option)
]
RequiredWhyOption = Annotated[
    str, typer.Option(help=f"Why (recorded; required; {_BOUNDED}).", callback=_reason)
]
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


def bind_option(value: str | None) -> str | None:
    """An address to serve on, IP:port (the metrics server takes no host name); anything else
    is a usage error before anything starts."""
    import ipaddress

    if value is None:
        return None
    host, _, port = value.rpartition(":")
    try:
        ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
        valid = port.isdigit() and int(port) < 65536
    except ValueError:
        valid = False
    if not valid:
        raise typer.BadParameter(f"{value!r}: expected IP:port, e.g. 0.0.0.0:9464")
    return value


MetricsOption = Annotated[
    str | None,
    typer.Option(
        callback=bind_option,
        help="Serve Prometheus metrics on this host:port at /metrics (e.g. 0.0.0.0:9464).",
    ),
]
WorkflowCacheOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Workflow runs the controller keeps in memory (its RSS grows with it, not with the "
        "nodes in remediation); one evicted is replayed from its history when it next wakes. "
        "Default: 500 (250 for fleets whose ladders mostly wait). See docs/operations.md.",
    ),
]
DemoMetricsOption = Annotated[
    str | None,
    typer.Option(
        help="Serve the workers' Prometheus metrics on this IP:port (path /metrics).",
        callback=bind_option,
    ),
]
STALL_AFTER_S = STALL_AFTER.total_seconds()
StallAfterOption = Annotated[
    float,
    typer.Option(
        min=0,
        help="Seconds the controller's workflow tasks may wait on its queue, unpolled by it, "
        "before it exits (code 3) for its supervisor to start a fresh one: the SDK worker can "
        "stop polling with nothing logged. At least 60; 0: not watched. See docs/operations.md.",
    ),
]
RedactPatternsOption = Annotated[
    Path | None,
    typer.Option(
        envvar="REMEDY_REDACT_PATTERNS",
        help="Redaction patterns (YAML) added to the defaults: what pods and nodes wrote is "
        "redacted by them before it reaches a workflow (see docs/operations.md).",
    ),
]
