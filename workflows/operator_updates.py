"""An operator's decisions on a NodeRemediation — approve, clear, abort — as updates that answer,
and as the signals of the same names that clients of the release before still send.

Each update's validator says why it would change nothing (nothing waits for approval, a rung
the ladder passed, already approved, the ladder finished or already stopping): the caller gets
the reason and nothing reaches the history. Its handler makes the same change as the signal
(one method each) and waits, bounded, until the ladder acted on it, so the answer says what
happened: the phase the ladder moved to, or how it ended.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

from contract.messages import ABORT, ABORT_LADDER, APPROVE, APPROVE_RUNG, CLEAR, CLEAR_LADDER
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.models import signed
    from remedy.remediation import (
        AbortRequest,
        Approval,
        ApproveRequest,
        ApproveResult,
        ClearRequest,
        Consent,
        Phase,
        RemediationState,
        StopResult,
    )

# How long an update waits for the workflow to act on it before it answers with where things
# stand: an approval is acted on at once, unless a re-probe or a lease comes first.
ANSWER_WITHIN = timedelta(seconds=30)


async def acted(done: Callable[[], bool], summary: str) -> bool:
    """Wait until ``done`` (bounded by ANSWER_WITHIN); False when it was not by then."""
    if done():
        return True
    try:
        await workflow.wait_condition(done, timeout=ANSWER_WITHIN, timeout_summary=summary)
    except TimeoutError:
        return False
    return True


class OperatorMessages:
    """Mixed into NodeRemediation: its state, its view and the stop request it acts on."""

    _state: RemediationState
    _view: RemediationView
    _stop_request: AbortRequest | ClearRequest | None

    # -- approve ---------------------------------------------------------------------------
    @APPROVE.handler
    def approve(self, req: ApproveRequest) -> None:
        self._approve(req)

    @APPROVE_RUNG.handler
    async def approve_rung(self, req: ApproveRequest) -> ApproveResult:
        state = self._state
        waiting = state.phase is Phase.AWAITING_APPROVAL
        rung = self._approve(req)
        ahead = not waiting or rung != state.rung
        moved = ahead or await acted(
            lambda: state.phase is not Phase.AWAITING_APPROVAL or state.rung != rung,
            f"the ladder acts on the approval of rung {rung}",
        )
        ladder = state.runbook.ladder if state.runbook else []
        return ApproveResult(
            node=state.node.name,
            rung=rung,
            action=ladder[rung].action,
            by=signed(req.by, req.identity),
            phase=state.phase,
            ahead=ahead,
            moved=moved,
        )

    @APPROVE_RUNG.validator(approve_rung)
    def why_not_approve(self, req: ApproveRequest) -> str:
        return self._why_not_stop("approve") or self._state.why_not_approve(req)

    def _approve(self, req: ApproveRequest) -> int:
        state = self._state
        rung = req.rung if req.rung is not None else state.rung
        consent = state.waits_for(rung) or Consent.RUNG
        if not state.approved(rung, consent):
            state.approvals.append(
                Approval(
                    rung=rung,
                    by=req.by,
                    at=workflow.now(),
                    note=req.note,
                    identity=req.identity,
                    epoch=state.epoch,
                    consent=consent,
                )
            )
            self._view.publish()
        return rung

    # -- clear and abort: the ladder stops ---------------------------------------------------
    @CLEAR.handler
    def clear(self, req: ClearRequest) -> None:
        self._stop_request = self._stop_request or req

    @ABORT.handler
    def abort(self, req: AbortRequest) -> None:
        self._stop_request = self._stop_request or req

    @CLEAR_LADDER.handler
    async def clear_ladder(self, req: ClearRequest) -> StopResult:
        self.clear(req)
        return await self._stopped()

    @CLEAR_LADDER.validator(clear_ladder)
    def why_not_clear(self, req: ClearRequest) -> str:
        return self._why_not_stop("clear")

    @ABORT_LADDER.handler
    async def abort_ladder(self, req: AbortRequest) -> StopResult:
        first = self._stop_request
        self.abort(req)
        return await self._stopped(first.who if isinstance(first, AbortRequest) else "")

    @ABORT_LADDER.validator(abort_ladder)
    def why_not_abort(self, req: AbortRequest) -> str:
        if isinstance(self._stop_request, AbortRequest) and self._state.phase is not Phase.DONE:
            return ""  # aborted already and still stopping: harmless, answered as such
        return self._why_not_stop("abort")

    async def _stopped(self, already: str = "") -> StopResult:
        state = self._state
        await acted(lambda: state.phase is Phase.DONE, "the ladder stops")
        return StopResult(
            node=state.node.name,
            phase=state.phase,
            outcome=state.outcome,
            detail=state.outcome_detail,
            already=already,
        )

    def _why_not_stop(self, verb: str) -> str:
        state, pending = self._state, self._stop_request
        if state.outcome is not None or state.phase is Phase.DONE:
            return f"the ladder is finished ({state.outcome or 'done'}): nothing to {verb}"
        if pending is not None:
            how = "cleared" if isinstance(pending, ClearRequest) else "aborted"
            return f"the ladder is already stopping ({how} by {pending.who}): nothing to {verb}"
        return ""
