"""`remedy controller`'s drain flags: kubectl drain's (their defaults kubectl's) and
NVSentinel-style per-namespace modes, checked here, once, into the adapter's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from workers.cli.exits import BAD_INPUT

if TYPE_CHECKING:
    from adapters.kubernetes.drain_modes import DrainModes
    from adapters.kubernetes.drain_rules import DrainRules

DeleteEmptydirOption = Annotated[
    bool,
    typer.Option(
        "--drain-delete-emptydir-data",
        help="Evict pods using emptyDir volumes (their data is lost); without it a drain that "
        "meets one is refused (kubectl's --delete-emptydir-data).",
    ),
]
ForceOption = Annotated[
    bool,
    typer.Option(
        "--drain-force",
        help="Evict pods that declare no controller and pods whose DaemonSet is gone; without "
        "it a drain that meets one is refused (kubectl's --force).",
    ),
]
SkipWaitOption = Annotated[
    float,
    typer.Option(
        "--drain-skip-wait-for-delete-timeout",
        min=0,
        help="On a NotReady node, seconds after their deletion that Terminating pods are no "
        "longer waited for (no kubelet finishes them); 0 waits for them.",
    ),
]
ModeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--drain-mode",
        help="NAMESPACE=MODE (a glob; * for the rest), MODE one of immediate, "
        "allow-completion, delete-after-timeout (repeatable). Default: immediate.",
    ),
]
DeleteAfterOption = Annotated[
    float,
    typer.Option(
        "--drain-delete-after",
        min=1,
        help="Seconds into a drain after which pods of delete-after-timeout namespaces still "
        "there are deleted (with their own grace period; the drain waits until they are gone).",
    ),
]
DeleteGraceOption = Annotated[
    int | None,
    typer.Option(
        "--drain-delete-grace-max",
        min=0,
        help="The longest grace period those deletes give a pod (seconds); default: each "
        "pod's own terminationGracePeriodSeconds.",
    ),
]


def drain_settings(
    delete_emptydir_data: bool,
    force: bool,
    skip_wait_s: float,
    modes: list[str] | None,
    delete_after_s: float,
    delete_grace_max_s: int | None = None,
) -> tuple[DrainRules, DrainModes]:
    """The rules and modes; bad input is one line naming the flag, and exit 1."""
    from adapters.kubernetes.drain import DRAIN_TIMEOUT_S
    from adapters.kubernetes.drain_modes import DrainModes
    from adapters.kubernetes.drain_rules import DrainRules

    rules = DrainRules(
        delete_emptydir_data=delete_emptydir_data,
        force=force,
        skip_wait_for_delete_timeout_s=skip_wait_s,
    )
    try:
        parsed = DrainModes.parse(modes or [], delete_after_s, delete_grace_max_s)
    except ValueError as exc:
        _fail("--drain-mode", exc)
    if too_long := parsed.too_long_for(DRAIN_TIMEOUT_S):
        flag = "--drain-delete-grace-max" if delete_grace_max_s else "--drain-delete-after"
        _fail(flag, ValueError(too_long))
    return rules, parsed


def _fail(option: str, exc: ValueError) -> NoReturn:
    typer.echo(f"error: {option}: {str(exc).splitlines()[0]}", err=True)
    raise typer.Exit(BAD_INPUT) from None
