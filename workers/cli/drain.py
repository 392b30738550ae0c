"""`remedy controller`'s drain flags: kubectl drain's (their defaults kubectl's) and
NVSentinel-style per-namespace modes, checked here, once, into the adapter's settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

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
        "there are deleted without a grace period.",
    ),
]


def drain_settings(
    delete_emptydir_data: bool,
    force: bool,
    skip_wait_s: float,
    modes: list[str] | None,
    delete_after_s: float,
) -> tuple[DrainRules, DrainModes]:
    """The rules and modes; bad input is one line naming the flag, and exit 2."""
    from adapters.kubernetes.drain import DRAIN_TIMEOUT_S
    from adapters.kubernetes.drain_modes import DrainModes
    from adapters.kubernetes.drain_rules import DrainRules

    rules = DrainRules(
        delete_emptydir_data=delete_emptydir_data,
        force=force,
        skip_wait_for_delete_timeout_s=skip_wait_s,
    )
    try:
        parsed = DrainModes.parse(modes or [], delete_after_s)
    except ValueError as exc:
        _fail("--drain-mode", exc)
    if parsed.deletes and delete_after_s >= DRAIN_TIMEOUT_S:
        _fail(
            "--drain-delete-after",
            ValueError(f"must be shorter than the drain's timeout ({DRAIN_TIMEOUT_S:g}s)"),
        )
    return rules, parsed


def _fail(option: str, exc: ValueError) -> NoReturn:
    typer.echo(f"error: {option}: {str(exc).splitlines()[0]}", err=True)
    raise typer.Exit(2) from None
