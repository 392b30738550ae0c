"""What a finished ladder leaves behind: the node's conditions after a verified recovery, the
hardware record of the GPUs its fault named (repeat offenders), and what its records say."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.stopping import FinishedAfterStop
from workflows.common import RIDE_OUT, this_run

with workflow.unsafe.imports_passed_through():
    from remedy.core.actions import ACTIONS
    from remedy.core.models import ConditionsUpdate, Finding
    from remedy.ladder.hardware import Incident, IncidentReport, InService
    from remedy.ladder.remediation import (
        HANDLED_KEPT,
        AttemptResult,
        Outcome,
        RemediationInput,
        RemediationState,
    )
    from remedy.runbook.authored import Cause
    from remedy.runbook.schema import Rung

# Outcomes that count against the GPU (not a fault that cleared by itself, nor an abort).
INCIDENT_OUTCOMES = (Outcome.RECOVERED, Outcome.REPLACED, Outcome.NEEDS_HUMAN)


async def publish_healthy(state: RemediationState) -> None:
    """A verified-clean probe ended the ladder: say so in the node's conditions now, not at
    the agent's next round, or the fleet scan would start a second ladder on the old ones."""
    probe = state.last_probe
    if probe is None or not probe.healthy:
        return
    try:
        await act.PUBLISH_CONDITIONS.execute(
            ConditionsUpdate(node=state.node, report=probe),
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"conditions of {state.node.name}: healthy",
        )
    except ActivityError as err:  # the agent's next round publishes them anyway
        workflow.logger.warning("could not publish conditions: %s", err)


async def record_incidents(
    inp: RemediationInput, state: RemediationState, outcome: Outcome
) -> None:
    """Count a platform fault against every GPU serial it named (repeat offenders)."""
    if (
        outcome not in INCIDENT_OUTCOMES
        or state.runbook is None
        or state.trigger is None
        or state.runbook.cause is not Cause.PLATFORM
    ):
        return
    serials = sorted(
        dict.fromkeys(
            f.component.serial for f in state.findings if f.unhealthy and f.component.serial
        )
    )
    if not serials:
        return
    # The rung that declared the recovery: a fault back soon resumes above it.
    recovered_by = state.rung if outcome is Outcome.RECOVERED else None
    by = state.runbook.ladder[recovered_by].action.value if recovered_by is not None else ""
    incident = Incident(
        at=workflow.now(),
        node=state.node.name,
        fault=state.trigger.headline(),
        outcome=outcome.value,
        source=this_run(),
        runbook=state.runbook.name,
        rung=recovered_by,
        action=by,
    )
    try:
        await act.RECORD_INCIDENTS.execute(
            IncidentReport(
                serials=serials,
                incident=incident,
                in_service=InService(node=state.node, node_task_queue=inp.node_task_queue),
            ),
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"hardware record of {', '.join(serials)}",
        )
    except ActivityError as err:  # the node's outcome stands; the record is best effort
        workflow.logger.warning("could not record incidents for %s: %s", serials, err)


def cancelled(rung: Rung) -> str:
    """An attempt the ladder's stop cut short."""
    if ACTIONS[rung.action].reports_progress:
        return "stopped: the ladder was stopped while it ran"
    return "the ladder was stopped while it ran: asked to stop, it may still finish on the node"


def stopped_while(rung: Rung, stop: asyncio.CancelledError) -> tuple[AttemptResult, str]:
    """What the record says of a rung the ladder's stop came during: what it did when it
    finished all the same (a drain whose last eviction landed as the abort came), else cut
    short."""
    if isinstance(stop, FinishedAfterStop):
        result = stop.result
        detail = getattr(result, "detail", "") or "done"
        verdict = AttemptResult.DONE if getattr(result, "ok", True) else AttemptResult.FAILED
        return verdict, f"{detail} (it finished after the ladder was stopped)"
    return AttemptResult.CANCELLED, cancelled(rung)


def handled(before: list[str], findings: list[Finding]) -> list[str]:
    """The fingerprints of the findings handled, the run's own last (HANDLED_KEPT at most)."""
    own = [f.fingerprint() for f in findings]
    return [*[f for f in before if f not in own], *own][-HANDLED_KEPT:]
