"""What a ladder's GPU-scoped rungs did (remedy/gpu_scope.py): whether an attempt already did
what a rung would, and whether the ladder holds a GPU quarantine its restore must lift."""

from __future__ import annotations

from collections.abc import Sequence

from remedy.models import Action, Scope
from remedy.remediation import Attempt
from remedy.runbook.schema import Runbook


def covers(done: Attempt, scope: Scope, gpus: list[int]) -> bool:
    """Whether what ``done`` did (a drain, a killed job) is what a rung of ``scope`` would do
    for ``gpus``: a node's drain does every GPU's; one GPU's drain does neither a node's nor
    another GPU's (GPU 1's quarantine leaves GPU 6 in allocation, its pods on it)."""
    if done.gpus is None:
        return True
    return scope is Scope.GPU and (not done.gpus or (bool(gpus) and set(gpus) <= set(done.gpus)))


def holds_gpus(runbook: Runbook | None, attempts: Sequence[Attempt]) -> bool:
    """Whether the ladder ran a GPU-scoped drain or kill, so its restore has a quarantine to
    lift even where it never cordoned the node."""
    if runbook is None:
        return False
    ladder = runbook.ladder
    return any(
        0 <= a.rung < len(ladder)
        and ladder[a.rung].scope is Scope.GPU
        and ladder[a.rung].action in (Action.DRAIN, Action.KILL_JOB)
        for a in attempts
    )
