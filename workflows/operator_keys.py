"""The keyring a NodeRemediation checks operators' decisions against (remedy.signing).

A ladder loads the controller's keyring once, before its first step (since
``KEYS_WHEN_NEEDED``: before its first rung, or as soon as a decision comes, whichever is
first; not in its first workflow task, where every ladder of a storm paid a local activity
for it), through a controller activity, a local one since ``FIRST_TASK``: the answer is in
the history, so a replay checks against the same keys, and no one who can start or signal the
workflow (a node's agent) can hand it keys of their own. A continue-as-new carries the keys to
the next run (a changed keyring applies to the ladders that start after the controller loaded
it). A decision that comes before the answer is in (a validator cannot wait) is checked by its
handler once it is. Checking a signature is pure computation on the request, the workflow's
own id and run, and workflow.now(): a validator runs it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.patches import patched
from workflows.common import PATIENT_RETRY, cause_of, in_first_task

with workflow.unsafe.imports_passed_through():
    from remedy.remediation import RemediationInput
    from remedy.signing import Decision, Keyring, Operator, Signature, Verb

# workflow.patched: runs before recorded every decision unverified and took the signals of
# approve, abort and clear unchecked (a signal approved any rung, even one not in the ladder).
SIGNED_DECISIONS = "signed-operator-decisions"
# Runs before loaded the keyring at their start, beside the first cordon.
KEYS_WHEN_NEEDED = "keyring-loaded-when-first-needed"
KEYRING_CALL = timedelta(seconds=30)


class OperatorKeys:
    def __init__(self, inp: RemediationInput) -> None:
        self._checks: bool | None = None  # decided once per run (workflow.patched)
        self._keyring: Keyring | None = None
        self._failed = ""
        self._loading: asyncio.Task[None] | None = None
        self._when_needed = False  # KEYS_WHEN_NEEDED: loaded by ``ready``, not ``start``
        if inp.keyring is not None and workflow.info().continued_run_id:
            self._checks, self._keyring = True, inp.keyring  # the run before checked

    def start(self, later: bool = False) -> bool:
        """Whether this run checks decisions; the first call (the ladder's start, or a signal
        that came with the start) decides it and, in a run that checks, loads the keyring, or
        leaves it to ``ready`` when the ladder's start asks it ``later`` (``KEYS_WHEN_NEEDED``;
        a decision that came with the start has begun the load already)."""
        if self._checks is None:
            self._checks = patched(SIGNED_DECISIONS)
            self._when_needed = self._checks and later and patched(KEYS_WHEN_NEEDED)
            if self._checks and not self._when_needed:
                self._load_once()
        return self._checks

    def _load_once(self) -> None:
        if self._loading is None and self._keyring is None:
            self._loading = asyncio.create_task(self._load(in_first_task()))

    async def loaded(self, inp: RemediationInput) -> RemediationInput:
        """Wait until the keys are known: the ladder takes no step before it knows whose
        decisions count. Returns ``inp`` with the keyring, for a continue-as-new to carry."""
        await self.ready()
        return inp.model_copy(update={"keyring": self._keyring})

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
            self._keyring = await act.OPERATOR_KEYRING.execute(
                None,
                local=local,
                start_to_close_timeout=KEYRING_CALL,
                retry_policy=PATIENT_RETRY,
                summary="the operator keyring",
            )
        except ActivityError as err:  # fail closed: no keys, no signed decision counts
            self._failed = cause_of(err)
            workflow.logger.warning("operator keyring not loaded: %s", self._failed)

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
        epoch: int | None = None,
        text: str = "",
        restore: bool = False,
    ) -> tuple[str, Operator | None]:
        """Why the decision does not count (empty: it does), and who signed it (None: no
        keyring, so the decision is recorded unverified). Not ``settled`` yet (a ladder's
        first moments): empty, and the handler waits for the keys and asks again."""
        if not self._checks or not self.settled:
            return "", None  # a run from before signed decisions, or not known yet
        if self._keyring is None:
            return f"the operator keyring could not be loaded ({self._failed})", None
        if not self._keyring.required:
            return "", None
        info, now = workflow.info(), workflow.now()
        expected = Decision(
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            verb=verb,
            rung=rung,
            epoch=epoch,
            text=text,
            restore=restore,
            at=now,
        )
        why = self._keyring.why_not(signature, expected, now)
        if why or signature is None:
            return why, None
        return "", self._keyring.signer(signature.key)
