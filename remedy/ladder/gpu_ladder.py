"""A ladder's GPU-scoped rungs (remedy/acting/gpu_scope.py): the GPUs a rung acts on, whether an
attempt already did what a rung would, and whether the ladder holds a GPU quarantine its
restore must lift."""

from __future__ import annotations

from collections.abc import Sequence

from remedy.core.models import Action, ComponentKind, Finding, Scope
from remedy.ladder.remediation import Attempt
from remedy.ladder.verification import on_part_of
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


def faulty_gpus(trigger: Finding | None, findings: Sequence[Finding]) -> list[int]:
    """The GPUs a rung acts on: the trigger's, and those its part's unhealthy findings name
    (another GPU's fault gets its own runbook after this one)."""
    named = [trigger] if trigger is not None else []
    return sorted(
        dict.fromkeys(
            f.component.index
            for f in [*named, *findings]
            if f.unhealthy
            and f.component.index is not None
            and f.component.kind is ComponentKind.GPU
            and (trigger is None or on_part_of(trigger, f))
        )
    )
