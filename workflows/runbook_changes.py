"""When a ladder changes runbooks after it began: a worse fault takes over at the next rung
boundary (escalation), and once the trigger's fault is verified gone, a fault on another part
of the node (another GPU, a NIC) comes next with its own runbook, instead of a recovery that
would give the node back with it.

Reports come in as signals (``note``); the ladder acts on them only between rungs
(``take_over`` before a rung, ``next_fault`` after a verified one). A switch keeps what is done
and lasting (the cordon, a drain, a killed job: ``remedy.core.actions``) and starts the new
runbook's
ladder at its first rung that is not. Deterministic: the only I/O is the controller's runbook
match for a fault that only the verification probe showed.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import RIDE_OUT, LadderStop, cause_of
from workflows.node_steps import NodeSteps
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.core.models import Finding
    from remedy.core.numbering import first_number
    from remedy.detection import vocabulary
    from remedy.detection.probe.load import LoadReason
    from remedy.detection.probe.runner import (
        CHECK_FAILED,
        NVML_UNAVAILABLE,
        TIMED_OUT,
        UNAVAILABLE,
    )
    from remedy.ladder.remediation import (
        Escalation,
        FindingReport,
        Outcome,
        Phase,
        RemediationState,
        outranks,
    )
    from remedy.ladder.under_way import first_not_done
    from remedy.ladder.verification import on_part_of
    from remedy.runbook.schema import Runbook

MATCH_CALL = timedelta(seconds=30)
MAX_CHANGES = 8  # runbook changes in one ladder before it holds the node for a person


# The findings of a check that could not run (fail closed: unhealthy), which prove nothing.
COULD_NOT_JUDGE = frozenset(
    {TIMED_OUT, CHECK_FAILED, UNAVAILABLE, NVML_UNAVAILABLE, LoadReason.COULD_NOT_RUN.value}
)


class RunbookChanges:
    def __init__(self, state: RemediationState, steps: NodeSteps, view: RemediationView) -> None:
        self._state, self._steps, self._view = state, steps, view

    def note(self, report: FindingReport) -> None:
        """A report that came in after the ladder began and did not take over at once: kept
        when it is worse than the trigger or about another part. One about the trigger's part
        and no worse is only recorded: the rungs acting on that part answer for it."""
        state = self._state
        if state.runbook is None or state.trigger is None or state.phase is Phase.DONE:
            return
        if on_part_of(state.trigger, report.finding) and not state.outranks_trigger(report):
            return
        state.keep_pending(report)

    def worse_waiting(self) -> bool:
        """A kept report is worse than the trigger: the ladder should switch at the next
        boundary (a wait for an approval or a lease ends for it)."""
        state = self._state
        return bool(
            state.pending
            and state.trigger is not None
            and state.runbook is not None
            and outranks(state.pending[0], state.trigger, state.runbook)
        )

    async def take_over(self) -> bool:
        """Before a rung: switch to the worst kept report if it outranks the trigger."""
        if not self.worse_waiting():
            return False
        await self._switch(self._state.pending[0], "escalated")
        return True

    async def next_fault(self) -> bool:
        """After a rung verified the trigger's part healthy: another part's fault, kept from a
        report or seen by the verification (``state.elsewhere``), is next (with its runbook).
        False: none is left."""
        state = self._state
        seen = state.elsewhere
        state.pending = [p for p in state.pending if _still_there(p.finding, seen)]
        if not state.pending:
            unreported = seen[0] if seen else None
            if unreported is None:
                return False
            runbook = await self._runbook_for(unreported)
            if runbook is None:
                return False  # informational: nothing to do for it
            state.keep_pending(FindingReport(finding=unreported, runbook=runbook))
        await self._switch(state.pending[0], "continued")
        return True

    async def proven(self, found: list[Finding]) -> bool:
        """After a proving rung (runbook ``proves``) that did not pass: the first fault it
        found, with its runbook, drives the ladder from now on (the suspicion is proven; the
        cordon comes with that runbook). False: it found nothing with a runbook (a diagnose
        that could not run): the ladder goes on, and past its rungs a person looks. A check
        that could not run is no proof of slowness: its finding never proves (the node then
        ends needs_human, its suspect still uncordoned)."""
        for finding in (f for f in found if f.reason not in COULD_NOT_JUDGE):
            runbook = await self._runbook_for(finding)
            if runbook is not None and not runbook.proves:
                await self._switch(FindingReport(finding=finding, runbook=runbook), "proven")
                return True
        return False

    def record(self, report: FindingReport, kind: str, start: int = 0) -> None:
        """``report`` drives the ladder from now on: said in its record, and its runbook's
        rungs get keys and approvals of their own (a new epoch)."""
        state = self._state
        assert state.runbook is not None
        escalation = Escalation(
            at=workflow.now(),
            from_runbook=state.runbook.name,
            to_runbook=report.runbook.name,
            because=report.finding.headline(),
            kind=kind,
            from_rung=state.rung,
            to_rung=start,
            from_fault=state.trigger.headline() if state.trigger else "",
        )
        state.escalations = [*state.escalations, escalation]
        state.runbook, state.trigger = report.runbook, report.finding
        state.epoch += 1

    def left_over(self) -> FindingReport | None:
        """At the end of a ladder that gave the node back: a kept report still there, which
        the node's next ladder must take (a worse one that came as this one finished)."""
        state = self._state
        if state.trigger is None:
            return None
        left = [p for p in state.pending if _still_there(p.finding, state.elsewhere)]
        return left[0] if left else None

    async def _switch(self, report: FindingReport, kind: str) -> None:
        state = self._state
        assert state.runbook is not None
        if len(state.escalations) >= MAX_CHANGES:  # faults that keep coming: a person decides
            await self._steps.hold_cordoned()
            raise LadderStop(
                Outcome.NEEDS_HUMAN,
                f"{report.finding.headline()} after {MAX_CHANGES} runbook changes in one "
                "ladder; held for a person",
            )
        state.pending = [p for p in state.pending if p is not report]
        # on its own part: another GPU has its own quarantine and eviction first
        start = first_not_done(report.runbook, state.attempts, report.finding)
        self.record(report, kind, start)
        state.rung, state.prepare, state.resumed = start, [], ""
        state.fault_confirmed = False
        first = first_number(state.escalations, state.epoch)
        workflow.logger.info("%s: %s", state.node.name, state.escalations[-1].describe(first))
        if report.runbook.cordon and state.cordon is None:
            await self._steps.cordon("finding: " + report.finding.headline())
        self._view.enter(Phase.ACTING)

    async def _runbook_for(self, finding: Finding) -> Runbook | None:
        """The controller's runbook for a fault no report brought (the default one for an
        unhealthy fault no runbook names). Unreachable: the default's cautious way, a person."""
        try:
            matched = await act.MATCH_RUNBOOK.execute(
                finding,
                start_to_close_timeout=MATCH_CALL,
                **RIDE_OUT,
                summary=f"runbook for {finding.headline()}",
            )
        except ActivityError as err:
            workflow.logger.warning("no runbook for %s: %s", finding.headline(), cause_of(err))
            return None
        return matched.runbook


def _still_there(finding: Finding, seen: list[Finding]) -> bool:
    """A kept fault a probe can see is gone when the last probe no longer shows it; one only an
    event shows (most Xids) stays until its ladder runs."""
    if not vocabulary.seen_by_probe(finding.check, finding.reason):
        return True
    return any(f.reason == finding.reason and on_part_of(finding, f) for f in seen)


def next_ladder_state(state: RemediationState, report: FindingReport) -> RemediationState:
    """The node's next ladder, for a report this one kept and never reached: its own runbook
    and trigger, the other kept reports still kept."""
    return RemediationState(
        node=state.node,
        runbook=report.runbook,
        trigger=report.finding,
        findings=[report.finding],
        reports_received=1,
        pending=[p for p in state.pending if p is not report],
        runs=state.runs + 1,
    )
