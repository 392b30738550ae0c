"""`remedy controller`'s drain flags: kubectl drain's (their defaults kubectl's) and
NVSentinel-style per-namespace modes; the Kubernetes provider's settings check them
(adapters/kubernetes/provider.py)."""

from __future__ import annotations

from typing import Annotated

import typer

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
