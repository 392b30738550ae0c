"""What must hold before a rung acts, besides the lease: a person's approval where the runbook
asks for one, the fault still there (``confirm_fault``), and, for a rung that needs the node's
pods gone (reset, reboot, replace), a drain that did not fail — else the drain once more, then
what the rung's ``if_drain_failed`` says: ask a person (the default), stop, or force. A
node-level one (remedy.core.actions.needs_the_node_drained) with no node drain before it, only GPU
drains or none, cordons and drains the node first, unless its ``if_not_drained`` says force.

A wait for a person ends early with ``Interrupted`` when a worse fault came (the ladder
switches runbooks first). Deterministic: the clock is workflow.now(), waits are conditions
with timeouts, the drain and the probe are activities.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows.common import Interrupted, LadderStop, cause_of
from workflows.disruption_lease import DisruptionLease
from workflows.node_steps import NodeSteps
from workflows.operator_keys import OperatorKeys
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.core.actions import ACTIONS, cleared_by, needs_the_node_drained
    from remedy.core.durations import format_duration
    from remedy.core.models import Action
    from remedy.detection import vocabulary
    from remedy.ladder.remediation import AttemptResult, Outcome, Phase, RemediationState
    from remedy.runbook.authored import Approval as ApprovalMode
    from remedy.runbook.authored import IfDrainFailed, OnApprovalTimeout
    from remedy.runbook.drain_first import drain_like
    from remedy.runbook.schema import Rung
    from remedy.runbook.undrained import IfNotDrained
    from remedy.trust.decisions import Consent


class SkipRung(Exception):  # noqa: N818 - a control-flow signal, as Interrupted is
    """An approval no one answered skips its rung (``on_approval_timeout: skip``)."""


class RungGates:
    def __init__(
        self,
        state: RemediationState,
        steps: NodeSteps,
        view: RemediationView,
        lease: DisruptionLease,
        interrupted: Callable[[], bool],
        keys: OperatorKeys,
    ) -> None:
        self._state, self._steps, self._view = state, steps, view
        self._lease, self._interrupted, self._keys = lease, interrupted, keys

    async def approval(self, index: int, rung: Rung) -> None:
        """The rung's own approval, when its runbook asks for one."""
        if rung.approval is ApprovalMode.REQUIRED:
            await self._approved(index, rung, Consent.RUNG, f"approval for {rung.action.value}")

    async def _approved(self, index: int, rung: Rung, consent: Consent, what: str) -> None:
        """An approval that still counts once the keyring is read again: one signed with a
        key removed since is dropped, said, and asked for again."""
        state = self._state
        while True:
            if not state.approved(index, consent):
                await self._ask(index, rung, consent, what)
            if not self._keys.door:
                return  # a run from before: as it was
            await self._keys.fresh()
            given = next(
                a
                for a in reversed(state.approvals)
                if a.rung == index and a.epoch == state.epoch and a.consent is consent
            )
            why = self._keys.still_counts(given)
            if not why:
                return
            state.approvals = [a for a in state.approvals if a is not given]
            self._view.refused("approval", f"{why}: rung {state.number_of(index)} asks again")

    async def drained(self, index: int, rung: Rung) -> str:
        """For a rung that needs a drained node: a node-level one with no node drain before it
        drains the node first (unless ``if_not_drained: force``); after the ladder's drain
        failed, the drain again. Then, failed, ``if_drain_failed``. Returns what the rung's
        attempt should say of it."""
        if not ACTIONS[rung.action].needs_drained:
            return ""
        action = rung.action.value
        if self._never_drained(rung):
            if rung.if_not_drained is IfNotDrained.FORCE:
                return "; ran on an undrained node (no node drain before it; if_not_drained: force)"
            failed = await self._drain_first(index, rung)
        elif self._drain_failed():
            failed = await self._drain_again(rung)
        else:
            return ""
        if failed is None:
            return ""
        because = f"the drain failed ({failed}); {action} needs the node drained"
        match rung.if_drain_failed:
            case IfDrainFailed.FORCE:
                return f"; ran on an undrained node ({because}; if_drain_failed: force)"
            case IfDrainFailed.STOP:
                await self._steps.hold_cordoned()
                raise LadderStop(Outcome.NEEDS_HUMAN, f"{because}; held for a person")
        await self._approved(index, rung, Consent.UNDRAINED, f"approval to {action} undrained")
        who = next(a.who for a in reversed(self._state.approvals) if a.rung == index)
        return f"; ran on an undrained node, approved by {who} ({because})"

    async def confirm_fault(self) -> None:
        """With no tolerance window the ladder acts on the report alone, and a report can be
        stale (sent again, delayed): before the first disruptive rung, a fault a re-probe can
        see must still be there."""
        state = self._state
        assert state.runbook is not None and state.trigger is not None
        trigger = state.trigger
        if (
            state.fault_confirmed
            or state.runbook.tolerance > timedelta(0)
            or not vocabulary.seen_by_probe(trigger.check, trigger.reason)
        ):
            return
        state.fault_confirmed = True
        if (await self._steps.probe()).healthy:
            raise LadderStop(Outcome.CLEARED, "the fault was gone before the first disruptive rung")

    def _drain_failed(self) -> bool:
        drains = [a for a in self._state.attempts if a.action is Action.DRAIN and a.rung >= 0]
        return bool(drains) and not drains[-1].succeeded

    def _never_drained(self, rung: Rung) -> bool:
        """A node-level rung with nothing in the ladder's record that cleared the node for it:
        no node drain (a failed one is drained again), nor for a reset a job killed on the
        node; a GPU's drain leaves the other GPUs' pods. Runs from before ran it (DRAIN_FIRST)."""
        clears = cleared_by(rung.action)
        cleared = any(
            a.rung >= 0
            and a.gpus is None
            and a.action in clears
            and (a.action is Action.DRAIN or a.succeeded)
            for a in self._state.attempts
        )
        node_level = needs_the_node_drained(rung.action, rung.scope)
        return node_level and not cleared

    async def _drain_first(self, index: int, before: Rung) -> str | None:
        """The node cordoned (else its pods come back) and drained before ``before``, with the
        ladder's own drain rung's timeout and retries where it has one, recorded at
        ``before``'s rung: None when it drained the node, else why not."""
        ladder = self._state.runbook.ladder if self._state.runbook else []
        drain = drain_like(ladder) or Rung(action=Action.DRAIN)
        if self._state.cordon is None:
            await self._steps.cordon(f"drain before {before.action.value}")
        why = f"before {before.action.value}, which needs the node drained (no node drain yet)"
        return await self._drain(drain, index, why)

    async def _drain_again(self, before: Rung) -> str | None:
        """The ladder's drain rung once more (its own timeout and retries): None when it
        drained the node, else why not."""
        state = self._state
        assert state.runbook is not None
        ladder = state.runbook.ladder
        index = next((i for i, r in enumerate(ladder) if r.action is Action.DRAIN), None)
        rung = ladder[index] if index is not None else Rung(action=Action.DRAIN)
        at = index if index is not None else state.rung
        return await self._drain(rung, at, f"again before {before.action.value}")

    async def _drain(self, rung: Rung, at: int, why: str) -> str | None:
        """Run ``rung`` (a drain) under ``at``'s key, recorded there with ``why``."""
        started = workflow.now()
        self._view.enter(Phase.ACTING)
        try:
            result = await self._steps.act(rung, index=at)
        except ActivityError as err:
            detail, ok = cause_of(err), False
        else:
            detail, ok = result.detail, result.ok
        verdict = AttemptResult.DONE if ok else AttemptResult.FAILED
        self._view.record(at, Action.DRAIN, started, verdict, f"{why}: {detail}", rung.scope)
        return None if ok else detail

    async def _ask(self, index: int, rung: Rung, consent: Consent, what: str) -> None:
        """Wait for a person's approval. Holding a lease meanwhile, the ladder tells its
        budget it waits (the pool is held by people until someone answers). No answer by the
        rung's ``approval_timeout``: what its ``on_approval_timeout`` says."""
        state = self._state
        state.consent = consent
        self._view.enter(Phase.AWAITING_APPROVAL)
        asked = workflow.now()
        told = await self._lease.waits_for_person(what, asked)
        on_timeout = rung.on_approval_timeout
        forever = on_timeout is OnApprovalTimeout.WAIT
        deadline = (
            "no deadline" if forever else f"times out in {format_duration(rung.approval_timeout)}"
        )
        timed_out = False
        try:
            await workflow.wait_condition(
                lambda: state.approved(index, consent) or self._interrupted(),
                timeout=None if forever else rung.approval_timeout,
                timeout_summary=f"{what} ({deadline})",
            )
        except TimeoutError:
            timed_out = True
        finally:
            state.consent = Consent.RUNG
        if told:
            await self._lease.waits_for_person(what, None)
        if timed_out:
            await self._timed_out(index, rung, on_timeout, asked, what)
        if not state.approved(index, consent):
            raise Interrupted(f"a worse fault came while waiting for {what}")

    async def _timed_out(
        self, index: int, rung: Rung, on_timeout: OnApprovalTimeout, asked: datetime, what: str
    ) -> None:
        """No approval in time: skip the rung (``SkipRung``), or end the ladder with the node
        held for a person, its share of the pool kept (``needs_human``) or given back."""
        detail = f"no {what} within {format_duration(rung.approval_timeout)}"
        if on_timeout is OnApprovalTimeout.SKIP:
            detail += "; rung skipped (on_approval_timeout: skip)"
        elif on_timeout is OnApprovalTimeout.RELEASE:
            self._state.share_given_back = True
            detail += (
                f"; node held for a person, its share of pool {self._state.node.pool} given "
                "back (on_approval_timeout: release)"
            )
        self._view.record(index, rung.action, asked, AttemptResult.APPROVAL_TIMED_OUT, detail)
        if on_timeout is OnApprovalTimeout.SKIP:
            raise SkipRung(detail)
        await self._steps.hold_cordoned()
        raise LadderStop(Outcome.NEEDS_HUMAN, detail)
