"""NodeRemediation: one durable workflow per node that walks a runbook's escalation ladder.

cordon (if the runbook says so) → tolerance window (ends early on `clear` or a clean re-probe)
→ for each rung: skipped, saying why, if the node cannot perform it → approval if required →
disruption lease if the action is disruptive → action → settle → verify (with what saw the
fault: ``workflows.verification``) → stop at the first rung that leaves the node healthy and
restore it. Past the last rung the node stays cordoned and the outcome is "needs a human".
Deterministic: time from workflow.now(), side effects from activities only (the steps on the
node: ``workflows.node_steps``; the lease: ``workflows.disruption_lease``; what it can do:
``workflows.capabilities``). It believes only what the controller loaded or a key signed: its
start, reports and grants pass its door (``workflows.door``, ``workflows.ladder_messages``)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

from contract.messages import REMEDIATION_STATE
from contract.stopping import stop_when
from workflows.capabilities import NodeCapabilities
from workflows.common import Interrupted, LadderStop, cause_of, node_gone
from workflows.disruption_lease import DisruptionLease
from workflows.door import ReportIntake, failed, start_input
from workflows.ladder_endings import LadderEndings
from workflows.ladder_messages import LadderMessages
from workflows.ladder_records import stopped_while
from workflows.node_steps import NodeSteps, gone
from workflows.operator_updates import OperatorKeys, OperatorMessages
from workflows.person_hold import PersonHold, PersonHoldMessages
from workflows.quarantine_gate import QuarantineGate, QuarantineMessages
from workflows.remediation_view import RemediationView
from workflows.runbook_changes import RunbookChanges
from workflows.rung_gates import RungGates, SkipRung
from workflows.verification import Verification

with workflow.unsafe.imports_passed_through():
    from contract.names import NODE_REMEDIATION_WORKFLOW
    from remedy.core.actions import ACTIONS
    from remedy.core.durations import format_duration
    from remedy.core.models import Action, Finding
    from remedy.ladder.remediation import (
        AttemptResult,
        Outcome,
        Phase,
        RemediationResult,
        RemediationState,
    )
    from remedy.runbook.schema import Rung
    from remedy.trust.decisions import AbortRequest, ClearRequest, Refusal


@workflow.defn(name=NODE_REMEDIATION_WORKFLOW)
class NodeRemediation(
    LadderMessages, LadderEndings, OperatorMessages, QuarantineMessages, PersonHoldMessages
):
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        inp, dropped, self._bad_start = start_input(raw)  # the node, nothing more (door)
        self._input = inp
        self._state = inp.state or RemediationState(node=inp.node)
        if dropped:  # said once the ladder publishes
            self._state.refused = [Refusal(at=workflow.now(), verb="start", why=dropped)]
            self._state.refusals += 1
        self._runbook_changed = False
        self._stop_request: AbortRequest | ClearRequest | None = None
        self._aborts_judged = 0
        self._stopped_by_failure = False
        self._view = RemediationView(self._state)
        self._keys = OperatorKeys(inp)  # whose signed decisions count (operator_keys)
        self._steps = NodeSteps(inp, self._state, self._view)
        self._gate = QuarantineGate(self._state, self._view, self._steps.probe)
        self._steps.before_cordon = self._gate.before_cordon  # every cordon waits for leave
        self._lease = DisruptionLease(self._state, self._view)
        self._capabilities = NodeCapabilities(inp, self._state, self._view)
        self._verification = Verification(self._state, self._steps, self._view, self._worse_waiting)
        self._changes = RunbookChanges(self._state, self._steps, self._view)
        self._gates = RungGates(
            self._state, self._steps, self._view, self._lease, self._worse_waiting, self._keys
        )
        self._at_once = False  # True once the ladder started (handlers before it: False)
        self._intake = ReportIntake(self._state, self._view, inp.node_task_queue)
        self._hold = PersonHold(self._state, self._view)  # a node held since an abort
        self._found: list[Finding] = []  # the last rung's faults (a diagnose's, its probe's)

    # -- messages (the reports and grants: workflows.ladder_messages) --------------------------
    def _worse_waiting(self) -> bool:
        return self._at_once and self._changes.worse_waiting()

    @REMEDIATION_STATE.handler
    def state(self) -> RemediationState:
        return self._state

    # -- the run ---------------------------------------------------------------------------
    @workflow.run
    async def run(self, raw: RawValue) -> RemediationResult:
        if self._bad_start:  # fails once, said (workflows/door.py), no task-failure loop
            raise failed(self._bad_start)
        ladder = asyncio.create_task(self._remediate())
        await workflow.wait_condition(lambda: ladder.done() or self._stop_request is not None)
        ladder.cancel()  # a stop request came first (a ladder done is left as it is)
        with self._view.settling():  # its last word before the run ends, continues or fails
            try:
                outcome, detail = await ladder
            except asyncio.CancelledError:
                outcome, detail = await self._on_stop_request()
            return await self._finish(outcome, detail)

    async def _remediate(self) -> tuple[Outcome, str]:
        state = self._state
        self._keys.door = True  # decisions wait until the keys are in
        self._keys.decide_heard()
        self._gate.decide()
        self._keys.start(later=True)  # the keyring loads when first needed
        self._at_once = True
        # once stopped: only giving back; an abort being judged is heard before any step
        stop_when(lambda: self._stop_request is not None, self.abort_heard)
        try:
            if state.runbook is None:
                await self._intake.first_report(self._take)
            await self._hold.wait(self._continue_as_new_if_suggested)  # held: records, waits
            if state.phase is Phase.WAITING:
                await self._begin()
            self._input = await self._keys.before_window(self._input)  # unless loaded later
            if state.phase is Phase.TOLERATING:
                await self._tolerate()
                await self._verification.resume()  # the runbook is settled now
                self._view.enter(Phase.ACTING)
            self._input = await self._keys.loaded(self._input)  # before the first rung
            await self._keys.heard()  # an abort sent meanwhile stops it before the first rung
            return await self._climb()
        except LadderStop as stop:
            if stop.outcome is Outcome.CLEARED:
                await self._steps.restore()  # the fault went away: give back what remedy took
            return stop.outcome, stop.detail
        except ActivityError as err:
            if node_gone(err):
                return Outcome.NODE_GONE, gone(state.node.name)
            # A step past its deadline (an outage longer than the ladder rides out): never a
            # failed workflow with its node cordoned and nobody owning it. It holds the node
            # only if the runbook cordons or something disruptive ran; it counts against no GPU.
            self._stopped_by_failure = True
            disrupted = any(a.rung >= 0 and ACTIONS[a.action].disruptive for a in state.attempts)
            if state.runbook is not None and (state.runbook.cordon or disrupted):
                await self._steps.hold_cordoned()
            held = "cordoned" if state.cordoned_by_remedy else "not cordoned by remedy"
            return (
                Outcome.NEEDS_HUMAN,
                f"a step failed past its deadline: {cause_of(err)}; node {held}",
            )

    async def _begin(self) -> None:
        state = self._state
        assert state.runbook is not None and state.trigger is not None
        now = workflow.now()
        state.started_at = now
        state.tolerance_ends_at = now + state.runbook.tolerance
        workflow.logger.info(
            "%s: %s → runbook %s", state.node.name, state.trigger.headline(), state.runbook.name
        )
        reason = "finding: " + state.trigger.headline()
        if state.runbook.cordon:  # at the floor, the report after it (quarantine_gate)
            await self._gate.cordon_first(self._steps.cordon, reason, at=now)
        else:  # the report asks leave, first
            await self._gate.ask(at=now)
        self._view.enter(Phase.TOLERATING)

    async def _tolerate(self) -> None:
        """Wait out the tolerance window; a clean re-probe inside or at its end ends it."""
        state = self._state
        while True:
            runbook = state.runbook
            assert runbook is not None and state.started_at and state.tolerance_ends_at
            self._continue_as_new_if_suggested()
            now = workflow.now()
            if now >= state.tolerance_ends_at:
                break
            wake = state.tolerance_ends_at
            if runbook.recheck_every:
                wake = min(wake, now + runbook.recheck_every)
            try:
                await workflow.wait_condition(
                    lambda: self._runbook_changed,
                    timeout=wake - now,
                    timeout_summary=f"tolerance window {format_duration(runbook.tolerance)}",
                )
            except TimeoutError:
                if wake < state.tolerance_ends_at and (await self._steps.probe()).healthy:
                    raise LadderStop(
                        Outcome.CLEARED, "clean re-probe inside the tolerance window"
                    ) from None
                continue
            await self._adopt_new_runbook()
        waited = state.runbook is not None and state.runbook.tolerance > timedelta(0)
        if waited and (await self._steps.probe()).healthy:
            raise LadderStop(Outcome.CLEARED, "the fault cleared within the tolerance window")
        if self._runbook_changed:  # a report that came in during the last probe
            await self._adopt_new_runbook()

    async def _adopt_new_runbook(self) -> None:
        state = self._state
        self._runbook_changed = False
        assert state.runbook is not None and state.started_at and state.tolerance_ends_at
        workflow.logger.info("%s: runbook now %s", state.node.name, state.runbook.name)
        state.tolerance_ends_at = min(
            state.tolerance_ends_at, state.started_at + state.runbook.tolerance
        )
        if state.runbook.cordon and state.cordon is None:
            trigger = state.trigger.headline() if state.trigger else ""
            await self._steps.cordon("finding: " + trigger)

    async def _climb(self) -> tuple[Outcome, str]:
        state = self._state
        assert state.runbook is not None
        resume_at = state.rung
        while state.prepare:  # a resumed ladder clears the node first, as its lower rungs did
            state.rung = state.prepare.pop(0)  # the rung's own key, not the one resumed at
            await self._climb_rung(state.rung, state.runbook.ladder[state.rung])
            state.rung = resume_at
        while True:
            await self._intake.settled()  # a report still being checked is judged first
            self._continue_as_new_if_suggested()
            if await self._changes.take_over():
                continue  # a worse fault: its runbook, past what is done (runbook_changes)
            ladder = state.runbook.ladder
            if state.rung >= len(ladder):
                break
            rung = ladder[state.rung]
            try:
                healthy = await self._climb_rung(state.rung, rung)
            except Interrupted:
                continue
            if state.runbook.proves:  # a suspicion's proof (the slow node)
                if not healthy and await self._changes.proven(self._found or self._last_probed()):
                    continue  # proven: the fault it found, with its runbook, goes on
                await self._intake.settled()
                if await self._changes.take_over():
                    continue  # a worse fault reported during the proof: its runbook goes on
                said = state.attempts[-1].detail if state.attempts else "no attempt"
                if healthy:
                    return Outcome.UNPROVEN, f"not proven: {said}"
                # Neither passed nor found a fault (it could not run): a person looks, and the
                # suspect, never proven, keeps its work (no cordon).
                return Outcome.NEEDS_HUMAN, f"the proof could not judge the node: {said}"
            if healthy:
                if rung.action is Action.REPLACE:
                    return Outcome.REPLACED, state.attempts[-1].detail
                await self._intake.settled()
                if await self._changes.take_over() or await self._changes.next_fault():
                    continue  # another part's fault comes next, with its own runbook
                await self._steps.restore()
                return Outcome.RECOVERED, f"healthy after {rung.action.value}"
            state.rung += 1
        await self._steps.hold_cordoned()
        tried = ", ".join(r.action.value for r in state.runbook.ladder) or "no rungs"
        return Outcome.NEEDS_HUMAN, f"still unhealthy after the whole ladder ({tried})"

    async def _climb_rung(self, index: int, rung: Rung) -> bool:
        """Run one rung; True when the node is healthy (or replaced) and climbing stops."""
        view = self._view
        if await self._capabilities.skips(index, rung.action):
            return False  # recorded with the node's reason; the next rung
        try:
            undrained = await self._gated(index, rung)
        except SkipRung:
            return False  # an approval no one answered (recorded); the next rung
        started = workflow.now()
        view.enter(Phase.ACTING)
        try:
            result = await self._steps.act(rung)
        except ActivityError as err:
            if node_gone(err):
                raise LadderStop(Outcome.NODE_GONE, gone(self._state.node.name)) from None
            view.record(index, rung.action, started, AttemptResult.FAILED, cause_of(err))
            return False
        except asyncio.CancelledError as stopped:  # it may have finished all the same
            view.record(index, rung.action, started, *stopped_while(rung, stopped))
            raise
        detail = result.detail + undrained
        self._found = [f for f in result.findings if f.unhealthy]
        if not result.ok:
            view.record(index, rung.action, started, AttemptResult.FAILED, detail)
            return False
        if not rung.verifies:
            view.record(index, rung.action, started, AttemptResult.DONE, detail)
            return rung.action is Action.REPLACE
        try:
            healthy, detail = await self._verification.after(rung, result)
        except asyncio.CancelledError:  # stopped while settling or verifying: the rung ran
            said = self._verification.stopped(result) + undrained
            view.record(index, rung.action, started, AttemptResult.DONE, said)
            raise
        verdict = AttemptResult.VERIFIED if healthy else AttemptResult.UNVERIFIED
        view.record(index, rung.action, started, verdict, detail + undrained)
        return healthy

    def _last_probed(self) -> list[Finding]:
        """The verification probe's faults (a rung that ran and did not verify)."""
        probe = self._state.last_probe
        return [f for f in probe.findings if f.unhealthy] if probe is not None else []

    async def _gated(self, index: int, rung: Rung) -> str:
        """What must hold before the rung acts: its approval, then for a disruptive one the
        fault still there, the lease and a drained node. Returns what the attempt should say
        of an undrained node."""
        await self._gates.approval(index, rung)
        if not ACTIONS[rung.action].disruptive:
            return ""
        await self._gates.confirm_fault()
        gpus = self._steps.request(rung.action).gpu_indices  # a GPU-scoped rung's
        await self._lease.hold(self._worse_waiting, rung.scope, gpus)
        return await self._gates.drained(index, rung)
