"""`remedy doctor`: check, on this node, everything remedy relies on (registered in
__init__.py). One line per dependency; exit 0 when nothing is missing, 1 when something is
(each missing one named, with what the node cannot do without it), 2 when it could not check."""

from __future__ import annotations

import json
import socket
from typing import Annotated

import typer

from remedy.acting.capabilities import capabilities_from
from workers.cli.node import local_host_or_exit
from workers.flags.agent import (
    AgentFlags,
    DcgmHostOption,
    ExpectedGpusOption,
    ExpectedNicsOption,
    NicRateOption,
    RebootCommandOption,
)
from workers.flags.options import JsonOption, KernelLogOption

REBOOT_COMMAND = AgentFlags.model_fields["reboot_command"].default  # the agent's


def doctor(
    as_json: JsonOption = False,
    node: Annotated[str, typer.Option(help="Node name in the report.")] = socket.gethostname(),
    expected_gpus: ExpectedGpusOption = None,
    expected_nics: ExpectedNicsOption = None,
    nic_rate: NicRateOption = None,
    kernel_log: KernelLogOption = "auto",
    allow_reset: Annotated[bool, typer.Option(help="As the agent will be started.")] = False,
    allow_reboot: Annotated[bool, typer.Option(help="As the agent will be started.")] = False,
    reboot_command: RebootCommandOption = REBOOT_COMMAND,
    dcgm_host: DcgmHostOption = "",
    timeout: Annotated[float, typer.Option(help="Seconds NVML may take to answer.")] = 5.0,
) -> None:
    """Check what remedy needs here, with the agent's options: NVML and the expected GPUs, the
    reset tool, the reboot path (without rebooting), the load-test engine, the kernel log, NIC
    expectations. Exit 0 ready, 1 something missing, 2 could not check."""
    try:  # a bad flag: one line and exit 1; a host that cannot even be looked at: exit 2
        host = local_host_or_exit(
            node=node,
            expected_gpus=expected_gpus,
            expected_nics=expected_nics,
            nic_rate=nic_rate,
            timeout=timeout,
            kernel_log=kernel_log,
            allow_reset=allow_reset,
            allow_reboot=allow_reboot,
            reboot_command=reboot_command,
            dcgm_host=dcgm_host,
        )
        capabilities = capabilities_from(host.dependencies(refresh=True))
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001 - a line and exit 2, never a traceback
        typer.echo(f"error: could not check {node}: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        body = {"node": node, **capabilities.model_dump(mode="json")}
        typer.echo(json.dumps({**body, "ready": capabilities.ready}, indent=2))
    else:
        missing = [c.name for c in capabilities.missing]
        verdict = f"missing {', '.join(missing)}" if missing else "ready"
        typer.echo(f"{node}: {verdict}")
        for check in capabilities.checks:
            typer.echo(f"  {check.line()}")
    raise typer.Exit(0 if capabilities.ready else 1)
