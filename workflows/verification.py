"""A ladder's checks that its rungs hold: verify a rung with what saw the fault
(``remedy.ladder.verification``), and start a ladder above a rung whose recovery did not hold
(``remedy.ladder.recurrence``). Deterministic: the watch is a timer, the Xids and the hardware
record
come from activities."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import PATIENT_RETRY, RIDE_OUT, cause_of
from workflows.node_steps import CLUSTER_CALL, NodeSteps
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.attribution.evidence import recent_xid
    from remedy.core.durations import format_duration
    from remedy.core.models import Action, ActionResult, Finding, ProbeReport
    from remedy.ladder.hardware import SerialsCheck
    from remedy.ladder.recurrence import resume_rung
    from remedy.ladder.remediation import Phase, RemediationState
    from remedy.ladder.verification import (
        VerifyBy,
        XidsSince,
        healthy_for,
        on_part_of,
        other_parts,
        recurrences,
        verify_by,
    )
    from remedy.runbook.schema import Rung

RECORD_LOOKUP = timedelta(minutes=2)  # a ladder waits no longer than this for the record


class Verification:
    def __init__(
        self,
        state: RemediationState,
        steps: NodeSteps,
        view: RemediationView,
        worse: Callable[[], bool],
    ) -> None:
        self._state, self._steps, self._view, self._worse = state, steps, view, worse
        self._doing = "its verification"  # what the checks do now: said if the ladder stops

    async def after(self, rung: Rung, result: ActionResult) -> tuple[bool, str]:
        """The rung's settle, then its verification: whether the node is healthy, and what the
        attempt says."""
        if rung.settle > timedelta(0):
            self._view.enter(Phase.SETTLING)
            self._doing = f"its {format_duration(rung.settle)} settle"
            await workflow.sleep(
                rung.settle,
                summary=f"settle {format_duration(rung.settle)} after {rung.action.value}",
            )
        self._view.enter(Phase.VERIFYING)
        self._doing = "its verification probe"
        return await self.verify(rung, result)

    def stopped(self, result: ActionResult) -> str:
        """What the record says of a rung that ran and that the ladder's stop came after: it
        was done, and not verified."""
        return f"{result.detail}; not verified: the ladder was stopped during {self._doing}"

    async def verify(self, rung: Rung, result: ActionResult) -> tuple[bool, str]:
        """After a rung and its settle: whether the fault is gone, and what the attempt says.
        The probe always runs (fail closed: a dead agent verifies nothing); then the diagnose
        again for a fault only load showed, or a quiet watch for an Xid no probe sees."""
        state = self._state
        assert state.runbook is not None and state.trigger is not None
        trigger, watch = state.trigger, state.runbook.watch
        ended = workflow.now() - rung.settle  # the settle began as the action ended
        report = await self._steps.probe()
        how = verify_by(trigger)
        state.elsewhere = other_parts(trigger, report)
        healthy = healthy_for(trigger, report)
        if not healthy or how is VerifyBy.PROBE:
            return healthy, summary(result, report, trigger)
        if how is VerifyBy.DIAGNOSE:
            if rung.action is Action.DIAGNOSE:  # the rung itself was the diagnose, and passed
                return True, summary(result, report)
            return await self._diagnose(result)
        if watch > timedelta(0):
            self._doing = f"its {format_duration(watch)} watch for {trigger.headline()}"
            if await self._watch(watch, f"watch {format_duration(watch)} for {trigger.headline()}"):
                return False, self._worse_came(result)
        self._doing = "its verification"
        try:
            seen = await act.XIDS_SINCE.execute(
                XidsSince(node=state.node, since=ended),
                start_to_close_timeout=CLUSTER_CALL,
                **RIDE_OUT,
                summary=f"Xids on {state.node.name} since {rung.action.value}",
            )
        except ActivityError as err:
            return False, f"{result.detail}; could not read the node's Xids: {cause_of(err)}"
        # Also what was reported to this ladder meanwhile: the node's annotation is best effort.
        reported = [x for f in state.findings if f.xid is not None and (x := recent_xid(f))]
        again = recurrences(trigger, [*seen.xids, *reported], ended)
        if again:
            return False, (
                f"{result.detail}; {trigger.headline()} again at {again[0].at:%H:%M:%S} "
                f"(watch {format_duration(watch)})"
            )
        report = await self._steps.probe()  # the agent that kept the Xids is still there
        if not healthy_for(trigger, report):
            return False, summary(result, report, trigger)
        said = summary(result, report, trigger)
        return True, f"{said}; no {_code(trigger)} for {format_duration(watch)}"

    async def _watch(self, watch: timedelta, said: str) -> bool:
        """The quiet watch; True when a worse fault ended it: that fault's runbook takes over
        at once (its cordon first), not after the watch."""
        try:
            await workflow.wait_condition(self._worse, timeout=watch, timeout_summary=said)
        except TimeoutError:
            return False
        return True

    def _worse_came(self, result: ActionResult) -> str:
        state = self._state
        worse = state.pending[0].finding.headline() if state.pending else "a worse fault"
        now = state.trigger.headline() if state.trigger else "the fault"
        return (
            f"{result.detail}; not verified: {worse} came during the watch, worse than {now}; "
            "its runbook takes over"
        )

    async def _diagnose(self, result: ActionResult) -> tuple[bool, str]:
        """The deep diagnose again, on every GPU (``diagnose-every-gpu``), with the runbook's own
        diagnose rung (its timeout and retries) when it has one."""
        assert self._state.runbook is not None
        own = [r for r in self._state.runbook.ladder if r.action is Action.DIAGNOSE]
        rung = own[0] if own else Rung(action=Action.DIAGNOSE)
        self._doing = "its verification diagnose"
        try:
            diagnosed = await self._steps.act(rung)
        except ActivityError as err:
            return False, f"{result.detail}; the diagnose could not run: {cause_of(err)}"
        trigger = self._state.trigger
        assert trigger is not None
        # Another GPU failing under load is a finding of its own, not this rung's failure.
        mine = [f for f in diagnosed.findings if on_part_of(trigger, f)]
        ok = diagnosed.ok or (bool(diagnosed.findings) and not mine)
        if ok:
            others = [f for f in diagnosed.findings if f not in mine]
            self._state.elsewhere = [*self._state.elsewhere, *others]
        verdict = "diagnose passed" if diagnosed.ok else "diagnose failed"
        if ok and not diagnosed.ok:
            verdict = f"diagnose passed on {trigger.component.describe()}; elsewhere"
        return ok, f"{result.detail}; probe clean; {verdict}: {diagnosed.detail}"

    async def resume(self) -> None:
        """A fault back on the trigger's GPU soon after a ladder of the same runbook declared
        it recovered: start above the rung that did so. The record is best effort: without
        it the ladder starts from the bottom, as before."""
        state = self._state
        assert state.runbook is not None and state.trigger is not None
        serial = state.trigger.component.serial
        if not serial or state.runbook.recurrence_window <= timedelta(0):
            return
        try:
            past = await act.PAST_INCIDENTS.execute(
                SerialsCheck(serials=[serial]),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=PATIENT_RETRY,
                schedule_to_close_timeout=RECORD_LOOKUP,
                summary=f"past incidents of GPU {serial}",
            )
        except ActivityError as err:
            workflow.logger.warning("no hardware record for %s: %s", serial, cause_of(err))
            return
        resume = resume_rung(state.runbook, past.incidents, workflow.now())
        if resume is not None:
            state.rung, state.resumed = resume.rung, resume.describe(state.runbook)
            state.prepare = list(resume.prepare)
            workflow.logger.info("%s: %s", state.node.name, state.resumed)


def _code(finding: Finding) -> str:
    return f"Xid {finding.xid}" if finding.xid is not None else finding.reason


def summary(result: ActionResult, report: ProbeReport, trigger: Finding | None = None) -> str:
    """What the verification probe said; with ``trigger``, of the trigger's part, and another
    part's faults apart (findings of their own, not a failed verification)."""
    others = other_parts(trigger, report) if trigger is not None else []
    elsewhere = "; elsewhere: " + ", ".join(f.headline() for f in others) if others else ""
    if report.healthy or (trigger is not None and healthy_for(trigger, report)):
        where = f" on {trigger.component.describe()}" if others and trigger else ""
        return f"{result.detail}; probe clean{where}{elsewhere}"
    left = ", ".join(f.headline() for f in report.findings if f.unhealthy and f not in others) or (
        "probe could not run"
    )
    return f"{result.detail}; still unhealthy: {left}{elsewhere}"
