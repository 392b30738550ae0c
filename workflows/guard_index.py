"""What the Web UI's list sees of a JobGuard: its search attributes — the job, the guard's
phase and since when, and ``RemedyOutcome = 'needs_human'`` while it is held for a person —
so that the list finds the guards that wait for someone without opening each one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

from contract import search_attributes as sa

with workflow.unsafe.imports_passed_through():
    from remedy.attribution.guard import GuardPhase, JobRef
    from remedy.ladder.remediation import Outcome


def guard_updates(
    job: JobRef, phase: GuardPhase, since: datetime
) -> list[SearchAttributeUpdate[Any]]:
    held = phase is GuardPhase.HELD
    return [
        sa.JOB.value_set(str(job)),
        sa.JOB_STATE.value_set(phase.value),
        sa.PHASE_SINCE.value_set(since),
        sa.OUTCOME.value_set(Outcome.NEEDS_HUMAN.value) if held else sa.OUTCOME.value_unset(),
    ]


class GuardIndex:
    """Upserts are commands: one per change of phase, and only in runs that know the patch.
    A run continued as new starts with its predecessor's attributes: the same phase is not
    upserted again, so its since stays that of the phase's start."""

    def __init__(self, job: JobRef) -> None:
        self._job = job
        self._indexed = workflow.info().typed_search_attributes.get(sa.JOB_STATE)

    def publish(self, phase: GuardPhase) -> None:
        if phase.value == self._indexed:
            return
        workflow.upsert_search_attributes(guard_updates(self._job, phase, workflow.now()))
        self._indexed = phase.value
