"""The keyring a NodeRemediation checks operators' decisions against (remedy.trust.signing).

A ladder loads the controller's keyring once, before its first rung, or as soon as a decision
comes, whichever is first (not in its first workflow task, where every ladder of a storm would
pay a local activity for it), through a controller activity, a local one: the answer is in
the history, so a replay checks against the same keys, and no one who can start or signal the
workflow (a node's agent) can hand it keys of their own. A continue-as-new carries the keys to
the next run (a changed keyring applies to the ladders that start after the controller loaded
it). A decision that comes before the answer is in (a validator cannot wait) is checked by its
handler once it is. Checking a signature is pure computation on the request, the workflow's
own id and run, and workflow.now(): a validator runs it.

Behind the door (workflows/door.py) nothing refused reaches the history: while the keys are not
in, or where a keyring is required and the ladder's copy is older than ``FRESH_FOR``, an
update's validator asks the caller to send it again (``Retry``) once it signalled
``load_keyring``, which reads the keyring anew — remedy's commands do both. But for an abort
before the keys are in: asked again, it would lose to the step the ladder takes meanwhile, so
it is taken at once and judged once they are in, the ladder starting no step in between
(``OperatorMessages.abort_ladder``); a forged one is refused then, its text in the history.
A key removed from the controller's keyring so stops counting within minutes on running
ladders too, and an approval signed with it is dropped before its rung acts
(``still_counts``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.defs import Retry
from contract.patches import HEARD_BEFORE_FIRST_RUNG, patched
from contract.stopping import unstoppable
from workflows.common import PATIENT_RETRY, cause_of

with workflow.unsafe.imports_passed_through():
    from remedy.ladder.remediation import RemediationInput
    from remedy.trust.decisions import Approval
    from remedy.trust.signing import Decision, Keyring, Operator, Signature, Verb

KEYRING_CALL = timedelta(seconds=30)
FRESH_FOR = timedelta(minutes=5)  # a required keyring older than this is read again first


class OperatorKeys:
    def __init__(self, inp: RemediationInput) -> None:
        self._checks: bool | None = None  # True once the run started (or came continued)
        self._keyring: Keyring | None = None
        self._failed = ""
        self._loading: asyncio.Task[None] | None = None
        self._when_needed = False  # loaded by ``ready``, not ``start``
        self._loaded_at: datetime | None = None  # when the keyring in hand was read
        self.door = False  # the door: decisions wait, refused for now, until the keys are in
        self._heard_before_rung = False  # decide_heard: the patch, asked at the run's start
        if inp.keyring is not None and workflow.info().continued_run_id:
            self._checks, self._keyring = True, inp.keyring  # the run before checked
            self._loaded_at = inp.keyring_read_at

    def start(self, later: bool = False) -> bool:
        """Whether this run checks decisions; the first call (the ladder's start, or a signal
        that came with the start) decides it and, in a run that checks, loads the keyring, or
        leaves it to ``ready`` when the ladder's start asks it ``later`` (when first needed;
        a decision that came with the start has begun the load already)."""
        if self._checks is None:
            self._checks, self._when_needed = True, later
            if not self._when_needed:
                self._load_once()
        return self._checks

    def _load_once(self) -> None:
        if self._loading is None and self._keyring is None:
            self._loading = asyncio.create_task(self._load(local=True), context=unstoppable())

    async def loaded(self, inp: RemediationInput) -> RemediationInput:
        """Wait until the keys are known: the ladder takes no step before it knows whose
        decisions count. Returns ``inp`` with the keyring, for a continue-as-new to carry."""
        await self.ready()
        return inp.model_copy(update={"keyring": self._keyring, "keyring_read_at": self._loaded_at})

    async def heard(self) -> None:
        """End the workflow task, the keys in hand, before the first rung. A ladder's first
        task runs from the report to its first rung in local activities (the cordon, the keys,
        the lease); a decision sent meanwhile is delivered only in the task after it, where,
        without this, the first rung has already begun. The next task delivers the decisions
        that came before the timer fires, and judges them at once: an abort sent right after
        the report stops the ladder before its drain (tests/test_abort_wins.py)."""
        if self._heard_before_rung:
            await workflow.sleep(timedelta(milliseconds=1), summary="decisions sent meanwhile")

    def decide_heard(self) -> None:
        """Ask the patch at the run's start, before any local activity: asked right after one
        (the keys), it met its marker in another workflow task on a replay whose local
        activity had outlived a task heartbeat (a nondeterminism error, seen under load)."""
        self._heard_before_rung = patched(HEARD_BEFORE_FIRST_RUNG)

    def refresh(self) -> None:
        """Read the keyring anew unless the copy in hand is fresh or a read is under way (the
        ``load_keyring`` signal: anyone may send it, and it costs one read at most)."""
        if self._checks is not True or not (self._loading is None or self._loading.done()):
            return
        if self._keyring is not None and self._fresh():
            return
        # A regular activity: a local one from a handler, while the ladder goes on, would land
        # in the history where its answer happened to come (workflows/door.py).
        self._loading = asyncio.create_task(self._load(local=False), context=unstoppable())

    async def fresh(self) -> None:
        """A keyring read within ``FRESH_FOR`` (a rung about to act on an approval)."""
        self.refresh()
        if self._loading is not None:
            await self._loading

    def _fresh(self) -> bool:
        read = self._loaded_at
        return read is not None and workflow.now() - read <= FRESH_FOR

    def not_ready(self) -> str:
        """Why a decision must come again later (``Retry``; empty: it can be judged now):
        the ladder has not read its keys yet, or holds a required keyring read too long ago."""
        if not self.door or self._checks is False:
            return ""
        again = "signal load_keyring (no input), then send this again (remedy's commands do)"
        if self._checks is None or not self.settled:
            return Retry(f"the ladder has not read the operator keyring yet: {again}")
        if self._keyring is not None and self._keyring.required and not self._fresh():
            read = f"{self._loaded_at:%H:%M:%S}" if self._loaded_at else "never"
            return Retry(f"the ladder's operator keyring was read at {read}: {again}")
        return ""

    def still_counts(self, approval: Approval) -> str:
        """Why a recorded approval no longer counts (empty: it does): the key it was signed
        with is no longer in the keyring, or a keyring is required now and it was unsigned."""
        keyring = self._keyring
        if not self.door or keyring is None or not keyring.required:
            return ""
        if not approval.key:
            return f"{approval.who}'s approval was not signed, and the keyring now requires it"
        if keyring.signer(approval.key) is None:
            return f"{approval.who}'s key is no longer in the operator keyring"
        return ""

    async def before_window(self, inp: RemediationInput) -> RemediationInput:
        """``loaded``, where a run loads its keys before its tolerance window: a run that
        loads them when needed goes on without them."""
        return inp if self._when_needed else await self.loaded(inp)

    async def ready(self) -> None:
        """Start the run's checks and wait for the keyring (a run that checks no decisions
        has none to wait for)."""
        if self.start():
            self._load_once()  # a run that loads when needed: now
        if self._loading is not None:
            await self._loading

    @property
    def idle(self) -> bool:
        """No load of the keyring under way. A ladder ends only then: its local activity in
        flight as the run completes, the SDK orders its marker after the completion, which
        the server refuses (a ladder whose first cordon found its node gone, say)."""
        return self._loading is None or self._loading.done()

    @property
    def settled(self) -> bool:
        """Whether ``check`` can say yet: the run decided, and its keyring is in (or failed)."""
        return self._checks is False or (
            self._checks is True and (self._keyring is not None or bool(self._failed))
        )

    async def _load(self, local: bool) -> None:
        try:
            keyring = await act.OPERATOR_KEYRING.execute(
                None,
                local=local,
                start_to_close_timeout=KEYRING_CALL,
                retry_policy=PATIENT_RETRY,
                summary="the operator keyring",
            )
        except ActivityError as err:  # fail closed: no keys, no signed decision counts
            self._failed = cause_of(err)
            workflow.logger.warning("operator keyring not loaded: %s", self._failed)
            return
        self._keyring, self._loaded_at, self._failed = keyring, workflow.now(), ""

    @property
    def required(self) -> bool:
        """A keyring is configured: only signed decisions count, and signals never do."""
        return self._keyring is not None and self._keyring.required

    def check(
        self,
        verb: Verb,
        signature: Signature | None,
        *,
        rung: int | None = None,
        rung_number: int | None = None,
        epoch: int | None = None,
        text: str = "",
        restore: bool = False,
        no_hold: bool = False,
    ) -> tuple[str, Operator | None]:
        """Why the decision does not count (empty: it does), and who signed it (None: no
        keyring, so the decision is recorded unverified). Not ``settled`` yet (a ladder's
        first moments): empty, and the handler waits for the keys and asks again. An approval
        is checked in the form it was signed in: for its rung's number (``rung_number``, from
        1), or, from a client of the release before, its index (``rung``, from 0)."""
        if not self._checks or not self.settled:
            return "", None  # a run from before signed decisions, or not known yet
        if self._keyring is None:
            return f"the operator keyring could not be loaded ({self._failed})", None
        if not self._keyring.required:
            return "", None
        info, now = workflow.info(), workflow.now()
        numbered = signature is not None and signature.decision.rung_number is not None
        expected = Decision(
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            verb=verb,
            rung=None if numbered else rung,
            rung_number=rung_number if numbered else None,
            epoch=epoch,
            text=text,
            restore=restore,
            no_hold=no_hold,
            at=now,
        )
        why = self._keyring.why_not(signature, expected, now)
        if why or signature is None:
            return why, None
        return "", self._keyring.signer(signature.key)
