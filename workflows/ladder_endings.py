"""A NodeRemediation's endings, mixed into it: a stop request answered (clear, abort), the
ladder's finish (the lease given back, the incidents recorded, the result), and the runs that
follow it by continue-as-new (the node's next ladder, a long wait's next run), which start on
the current worker version (workers/versioning.py)."""

from __future__ import annotations

from temporalio import workflow

from workflows import metrics
from workflows.disruption_lease import DisruptionLease
from workflows.door import ReportIntake
from workflows.ladder_records import handled, publish_healthy, record_incidents
from workflows.node_steps import NodeSteps
from workflows.operator_keys import OperatorKeys
from workflows.person_hold import PersonHold
from workflows.quarantine_gate import QuarantineGate
from workflows.remediation_view import RemediationView
from workflows.runbook_changes import RunbookChanges, next_ladder_state

with workflow.unsafe.imports_passed_through():
    from remedy.core.models import Action
    from remedy.ladder.remediation import (
        AttemptResult,
        Outcome,
        Phase,
        RemediationInput,
        RemediationResult,
        RemediationState,
    )
    from remedy.trust.decisions import AbortRequest, ClearRequest

# The node back in service (or never out of it: a suspicion unproven): nobody holds it, and a
# report kept for later starts the node's next ladder.
GAVE_BACK = (Outcome.RECOVERED, Outcome.CLEARED, Outcome.UNPROVEN)


def onto_current() -> workflow.ContinueAsNewVersioningBehavior | None:
    """A ladder is pinned to the worker version it started on (workers/versioning.py); its next
    run (the next ladder, a long wait's continuation) starts on the current one. None on an
    unversioned worker, which may not say so."""
    if workflow.info().get_current_deployment_version() is None:
        return None
    return workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE


class LadderEndings:
    _input: RemediationInput
    _state: RemediationState
    _view: RemediationView
    _keys: OperatorKeys
    _steps: NodeSteps
    _gate: QuarantineGate
    _lease: DisruptionLease
    _changes: RunbookChanges
    _intake: ReportIntake
    _hold: PersonHold
    _at_once: bool
    _stopped_by_failure: bool
    _stop_request: AbortRequest | ClearRequest | None

    async def _on_stop_request(self) -> tuple[Outcome, str]:
        req = self._stop_request
        if isinstance(req, ClearRequest):
            await self._steps.restore()
            why = f": {req.reason}" if req.reason else ""
            return Outcome.CLEARED, f"cleared by {req.who}{why}"
        assert isinstance(req, AbortRequest)
        if req.restore:
            await self._steps.restore()
        left = "restored" if req.restore else "left as it is"
        held = await self._hold.on_abort(req)  # unless --no-hold: no ladder acts until resumed
        return Outcome.ABORTED, f"aborted by {req.who}: {req.reason} (node {left}){held}"

    async def _finish(self, outcome: Outcome, detail: str) -> RemediationResult:
        state = self._state
        await self._lease.release(outcome)
        await self._gate.withdraw()  # an ask still held: it no longer counts
        if not self._stopped_by_failure:
            await record_incidents(self._input, state, outcome)
        await publish_healthy(state)
        await self._intake.settled()  # a report in the door: kept for the next ladder
        self._next_ladder_if_left_over(outcome)
        last = state.attempts[-1] if state.attempts else None
        if last and last.action is Action.RESTORE and last.result is AttemptResult.FAILED:
            detail += "; could not uncordon: the node stays cordoned and marked as remedy's"
        state.outcome, state.outcome_detail = outcome, detail
        self._view.enter(Phase.DONE)
        runbook = state.runbook.name if state.runbook else None
        metrics.remediation_finished(state.node.pool, runbook or "", outcome.value)
        await workflow.wait_condition(lambda: workflow.all_handlers_finished() and self._keys.idle)
        workflow.logger.info("%s: %s — %s", state.node.name, outcome.value, detail)
        return RemediationResult(
            node=state.node.name,
            outcome=outcome,
            detail=detail,
            runbook=runbook,
            attempts=state.attempts,
            handled=handled(self._input.handled_before, state.findings),
            approvals=state.approvals,
            escalations=state.escalations,
            refused=state.refused,
            refusals=state.refusals,
            sent_by=state.sent_by,
        )

    def _next_ladder_if_left_over(self, outcome: Outcome) -> None:
        """A report kept for later that this ladder never reached (it came as the ladder
        gave the node back) starts the node's next ladder at once, in a new run: never lost."""
        if not self._at_once or self._stop_request is not None or outcome not in GAVE_BACK:
            return
        report = self._changes.left_over()
        if report is None:
            return
        state = self._state
        workflow.logger.info("%s: next ladder for %s", state.node.name, report.finding.headline())
        fresh = next_ladder_state(state, report)
        kept = handled(self._input.handled_before, state.findings)
        workflow.continue_as_new(
            self._input.model_copy(update={"state": fresh, "handled_before": kept}),
            initial_versioning_behavior=onto_current(),
        )

    def _continue_as_new_if_suggested(self) -> None:
        suggested = workflow.info().is_continue_as_new_suggested()
        if suggested and self._stop_request is None and self._intake.idle:  # none in the door
            state = self._state.model_copy(update={"runs": self._state.runs + 1})
            # a long wait goes on on the current version: no older one kept up for it
            new = self._input.model_copy(update={"state": state})
            workflow.continue_as_new(new, initial_versioning_behavior=onto_current())
