"""An operator's decisions on a NodeRemediation — approve, clear, abort — as updates that answer,
and as the signals of the same names that clients of the release before still send.

Each update's validator says why it would change nothing (nothing waits for approval, a rung
the ladder passed, already approved, the ladder finished or already stopping): the caller gets
the reason and nothing reaches the history. Its handler makes the same change as the signal
(one method each) and waits, bounded, until the ladder acted on it, so the answer says what
happened: the phase the ladder moved to, or how it ended.

With a keyring (``workflows.operator_keys``) a decision counts only when signed by a key in
it, and the record names the keyring's operator and key; the signals, which cannot be signed
for an answer, are refused. Without one, decisions are recorded unverified, and the signals are
checked as the updates are (a refused one is kept in the state's ``refused``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contract.defs import REJECTED
from contract.messages import (
    ABORT,
    ABORT_LADDER,
    APPROVE,
    APPROVE_RUNG,
    CLEAR,
    CLEAR_LADDER,
    LOAD_KEYRING,
)
from contract.unreadable import Unreadable
from workflows.operator_keys import OperatorKeys as OperatorKeys  # with the messages
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.ladder.approval_check import why_not_approve
    from remedy.ladder.remediation import ApproveResult, Phase, RemediationState, StopResult
    from remedy.trust.decisions import AbortRequest, Approval, ApproveRequest, ClearRequest, Consent
    from remedy.trust.signing import KeyringWanted, Operator, Verb

DECISION_BYTES = 16 * 1024  # a decision with its note and signature is well under this
Request = ApproveRequest | AbortRequest | ClearRequest

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
    """Mixed into NodeRemediation: its state, its view, its keys and the stop request it acts
    on."""

    _state: RemediationState
    _view: RemediationView
    _keys: OperatorKeys
    _stop_request: AbortRequest | ClearRequest | None
    _aborts_judged: int  # aborts taken before the keys were in, waiting for them

    # -- approve ---------------------------------------------------------------------------
    @APPROVE.guarded(max_bytes=DECISION_BYTES)
    async def approve(self, req: ApproveRequest | Unreadable) -> None:
        if isinstance(req, Unreadable):  # refused where people look, not a traceback
            self._view.refused(Verb.APPROVE.value, req.why)
            return
        await self._keys.ready()
        why = self._why_not_approve(req)
        if not self._signal_refused(Verb.APPROVE, why):
            self._approve(req)

    @APPROVE_RUNG.handler
    async def approve_rung(self, req: ApproveRequest) -> ApproveResult:
        await self._checked_once_keys_known(lambda: self._why_not_approve(req))
        state = self._state
        waiting = state.phase is Phase.AWAITING_APPROVAL
        rung = self._approve(req)
        number = state.number_of(rung)
        ahead = not waiting or rung != state.rung
        moved = ahead or await acted(
            lambda: state.phase is not Phase.AWAITING_APPROVAL or state.rung != rung,
            f"the ladder acts on the approval of rung {number}",
        )
        ladder = state.runbook.ladder if state.runbook else []
        approval = next(a for a in reversed(state.approvals) if a.rung == rung)
        return ApproveResult(
            node=state.node.name,
            rung=rung,
            action=ladder[rung].action,
            by=approval.who,
            phase=state.phase,
            ahead=ahead,
            moved=moved,
            rung_number=number,
        )

    @APPROVE_RUNG.validator(approve_rung)
    def why_not_approve(self, req: ApproveRequest) -> str:
        return self._why_not_approve(req)

    def _why_not_approve(self, req: ApproveRequest) -> str:
        """The validator's reasons (remedy.ladder.approval_check): an approval in the old form
        (``rung``, from 0) of any rung but the one waiting is refused."""
        return (
            self._keys.not_ready()
            or self._signer(Verb.APPROVE, req)[0]
            or self._why_not_stop("approve")
            or why_not_approve(self._state, req)
        )

    def _approve(self, req: ApproveRequest) -> int:
        state = self._state
        rung = state.requested_rung(req)
        consent = state.waits_for(rung) or Consent.RUNG
        if not state.approved(rung, consent):
            req = req.model_copy(update=self._vouched(Verb.APPROVE, req))
            state.approvals.append(
                Approval(
                    rung=rung,
                    by=req.by,
                    at=workflow.now(),
                    note=req.note,
                    identity=req.identity,
                    epoch=state.epoch,
                    consent=consent,
                    key=req.key,
                )
            )
            self._view.publish()
        return rung

    # -- clear and abort: the ladder stops ---------------------------------------------------
    @CLEAR.handler
    async def clear(self, req: ClearRequest) -> None:
        await self._keys.ready()
        if not self._signal_refused(Verb.CLEAR, self.why_not_clear(req)):
            self._stop(Verb.CLEAR, req)

    @ABORT.handler
    async def abort(self, req: AbortRequest) -> None:
        await self._keys.ready()
        if not self._signal_refused(Verb.ABORT, self.why_not_abort(req)):
            self._stop(Verb.ABORT, req)

    def _stop(self, verb: Verb, req: AbortRequest | ClearRequest) -> None:
        self._stop_request = self._stop_request or req.model_copy(update=self._vouched(verb, req))

    @CLEAR_LADDER.handler
    async def clear_ladder(self, req: ClearRequest) -> StopResult:
        await self._checked_once_keys_known(lambda: self.why_not_clear(req))
        self._stop(Verb.CLEAR, req)
        return await self._stopped()

    @CLEAR_LADDER.validator(clear_ladder)
    def why_not_clear(self, req: ClearRequest) -> str:
        return (
            self._keys.not_ready()
            or self._signer(Verb.CLEAR, req)[0]
            or self._why_not_stop("clear")
        )

    @ABORT_LADDER.handler
    async def abort_ladder(self, req: AbortRequest) -> StopResult:
        self._aborts_judged += 1  # the ladder starts no step until it is judged (abort_heard)
        try:
            await self._checked_once_keys_known(lambda: self.why_not_abort(req))
            first = self._stop_request
            self._stop(Verb.ABORT, req)
        finally:
            self._aborts_judged -= 1
        return await self._stopped(first.who if isinstance(first, AbortRequest) else "")

    @ABORT_LADDER.validator(abort_ladder)
    def why_not_abort(self, req: AbortRequest) -> str:
        # Not asked again for want of keys: taken, and judged once they are in (operator_keys).
        if (why := self._keys.not_ready()) and self._keys.settled:
            return why  # a required keyring read too long ago: read again first
        if why := self._signer(Verb.ABORT, req)[0]:
            return why
        if isinstance(self._stop_request, AbortRequest) and self._state.phase is not Phase.DONE:
            return ""  # aborted already and still stopping: harmless, answered as such
        return self._why_not_stop("abort")

    async def abort_heard(self) -> None:
        """Before the ladder starts a step: an abort being judged may stop it. (Not a wait
        when there is none: a wait yields to the ladder's other tasks, reordering commands.)"""
        if self._aborts_judged:
            await workflow.wait_condition(lambda: self._aborts_judged == 0)

    @LOAD_KEYRING.guarded(max_bytes=1024)
    def load_keyring(self, _: KeyringWanted | Unreadable) -> None:
        self._keys.refresh()  # whatever it said: reading the keyring again is all it can do

    # -- who decided -------------------------------------------------------------------------
    def _signer(self, verb: Verb, req: Request) -> tuple[str, Operator | None]:
        """Why the request's signature does not count, and whose it is (remedy.trust.signing)."""
        if isinstance(req, ApproveRequest):
            state = self._state
            rung = state.requested_rung(req)
            return self._keys.check(
                verb,
                req.signature,
                rung=rung,
                rung_number=state.number_of(rung),
                epoch=state.epoch,
                text=req.note,
            )
        restore = isinstance(req, AbortRequest) and req.restore
        no_hold = isinstance(req, AbortRequest) and not req.hold
        return self._keys.check(
            verb, req.signature, text=req.reason, restore=restore, no_hold=no_hold
        )

    def _vouched(self, verb: Verb, req: Request) -> dict[str, str]:
        """What to record of who sent the request: the keyring's operator and their key's
        fingerprint when signed, else the caller's word (the key is the workflow's to set,
        never the caller's)."""
        operator = self._signer(verb, req)[1]
        if operator is None:
            return {"key": ""}
        return {"by": operator.name, "key": operator.fingerprint}

    async def _checked_once_keys_known(self, why_not: Callable[[], str]) -> None:
        """An update that came before the ladder knew its keys (its first moments: the
        validator could not check the signature): once they are in, the validator's checks
        again, refused as the validator refuses (this once, the request is in the history)."""
        if self._keys.settled:
            return
        self._keys.start(later=True)  # as the ladder's start decides, if it has not run yet
        self._keys.refresh()  # a regular activity from a handler (workflows/door.py says why)
        await self._keys.ready()
        if why := why_not():
            raise ApplicationError(why, type=REJECTED, non_retryable=True)

    def _signal_refused(self, verb: Verb, why: str) -> bool:
        """A decision sent as a signal: refused with a keyring (it is never signed for an
        answer), else checked as its update is. A refusal is kept (a signal cannot answer)."""
        if not self._keys.start():
            return False  # a run from before: signals as they were
        if self._keys.required:
            why = f"a {verb} signal is not taken with a keyring: send the signed update"
        if not why:
            return False
        self._view.refused(verb.value, why)
        return True

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
