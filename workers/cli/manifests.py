"""`remedy render-manifests`: deploy/ for one install (registered in __init__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workers.cli.exits import BAD_INPUT
from workers.manifests.render import (
    AGENT,
    CONTROLLER,
    DEFAULT_KERNEL_LOG,
    DEPLOY,
    NAMESPACE,
    AgentFeatures,
    Install,
    dump,
    load,
    render,
)


def render_manifests(
    namespace: Annotated[str, typer.Option(help="The namespace remedy runs in.")] = NAMESPACE,
    agent_service_account: Annotated[
        str, typer.Option(help="The agent's service account (the one its policy binds).")
    ] = AGENT,
    controller_service_account: Annotated[
        str, typer.Option(help="The controller's service account.")
    ] = CONTROLLER,
    kernel_log: Annotated[
        str,
        typer.Option(
            help="Where the agent reads the kernel log: journal:DIR (the host's journal; "
            "root, DIR's parent read-only), kmsg (privileged), file:PATH or none."
        ),
    ] = DEFAULT_KERNEL_LOG,
    allow_reset: Annotated[
        bool, typer.Option(help="Let the agent reset GPUs (privileged).")
    ] = False,
    allow_reboot: Annotated[
        bool,
        typer.Option(
            help="Let the agent reboot its node, through nsenter into pid 1 (hostPID, root, "
            "SYS_ADMIN, SYS_PTRACE, SYS_CHROOT, SYS_BOOT, AppArmor unconfined)."
        ),
    ] = False,
    deploy: Annotated[Path, typer.Option(help="The manifests to render.")] = DEPLOY,
) -> None:
    """Print deploy/'s manifests for this install, to pipe to `kubectl apply -f -`: the
    namespace and service accounts wherever a manifest names them (the agent's admission
    policy too), and the agent DaemonSet with exactly the privileges its features need.
    Exit 1 naming what cannot be rendered."""
    install = Install(namespace, agent_service_account, controller_service_account)
    features = AgentFeatures(kernel_log, allow_reset, allow_reboot)
    try:
        docs = render(load(deploy), install, features)
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    typer.echo(dump(docs), nl=False)
