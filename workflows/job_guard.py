"""JobGuard: one workflow per guarded job. Pod failures (the `pod_failed` signal, sent by the
fleet scan's job watch) are attributed — platform, application or unknown, with the evidence —
and acted on as one failure: the ranks of a lockstep job fail together, and a pod that failed
before the last restart belongs to a run already restarted. A platform failure puts the node
its rule blames in remediation and restarts the job from its last checkpoint after a backoff,
up to a cap; an application failure stops the job (no restart); an unknown one is retried once.
Past a cap, or when a restart fails, the job is stopped and held for a human (`resume`). The
ledger of failures and time lost per verdict is the query `ledger` and the current details."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.messages import (
    GUARD_STATUS,
    JOB_FINISHED,
    JOB_LEDGER,
    JOB_PROGRESS,
    POD_FAILED,
    RELEASE_JOB,
    RESUME_JOB,
)
from workflows import job_sizes
from workflows.common import RIDE_OUT
from workflows.guard_index import GuardIndex
from workflows.job_stragglers import StragglerWatch, suspicion_lines
from workflows.metrics import job_ended, job_failure, job_goodput
from workflows.operator_updates import acted

with workflow.unsafe.imports_passed_through():
    from contract.names import JOB_GUARD_WORKFLOW, node_task_queue
    from remedy.attribution.guard import (
        Decision,
        Failure,
        GuardAction,
        GuardInput,
        GuardPhase,
        GuardResult,
        GuardStatus,
        JobFinished,
        JobLedger,
        JobProgress,
        NodeBlame,
        RestartRequest,
        ResumeRequest,
        ResumeResult,
        StopRequest,
    )
    from remedy.attribution.job_report import end_of, goodput_line
    from remedy.attribution.model import Attribution, PodFailure, Verdict
    from remedy.core.durations import format_duration
    from remedy.core.models import NodeRef

Attributed = tuple[PodFailure, Attribution]
# Which pod of one failure speaks for it: a platform fault explains the ranks that timed out
# around it, and an application error explains its peers' unknown ends.
PRECEDENCE = (Verdict.PLATFORM, Verdict.APPLICATION, Verdict.UNKNOWN)


@workflow.defn(name=JOB_GUARD_WORKFLOW)
class JobGuard:
    @workflow.init
    def __init__(self, inp: GuardInput) -> None:
        self._input = inp
        self._ledger = inp.ledger or JobLedger(job=str(inp.job))
        self._pending: list[PodFailure] = []
        self._seen = [(f.pod, f.at) for f in self._ledger.failures]
        self._resume: ResumeRequest | None = None
        self._finished: str | None = None
        self._phase = GuardPhase.WATCHING
        self._index = GuardIndex(inp.job)
        watching = lambda: self._phase is GuardPhase.WATCHING  # noqa: E731
        self._stragglers = StragglerWatch(inp, self._ledger, watching, self._show)

    @POD_FAILED.handler
    def pod_failed(self, failure: PodFailure) -> None:
        # A watcher may report the same failed pod again: it counts once.
        key = (failure.pod, failure.failed_at)
        if key not in self._seen:
            self._seen.append(key)
            self._pending.append(failure)

    @RESUME_JOB.handler  # the signal: clients of the release before
    def resume(self, req: ResumeRequest) -> None:
        # Only a hold is resumed: an early one must not wave through a hold that comes later.
        if self._phase is GuardPhase.HELD:
            self._resume = req
        else:
            workflow.logger.warning(
                "resume by %s ignored: %s is %s, not held",
                req.by,
                self._input.job,
                self._phase.value,
            )

    @RELEASE_JOB.handler
    async def release_job(self, req: ResumeRequest) -> ResumeResult:
        """The same, answered with the phase the guard moved to (restarting, stopped)."""
        self.resume(req)
        await acted(lambda: self._phase is not GuardPhase.HELD, "the guard acts on the resume")
        return ResumeResult(job=self._input.job, phase=self._phase, by=req.who)

    @RELEASE_JOB.validator(release_job)
    def why_not_resume(self, req: ResumeRequest) -> str:
        if self._phase is not GuardPhase.HELD:
            return f"the guard is {self._phase.value}, not held: nothing to resume"
        if self._resume is not None:
            return f"already resumed by {self._resume.who}"
        return ""

    @JOB_FINISHED.handler
    def job_finished(self, finished: JobFinished) -> None:
        """The job completed or was deleted (the job watch saw it): nothing left to guard."""
        self._finished = finished.reason

    @JOB_PROGRESS.handler
    def job_progress(self, progress: JobProgress) -> None:
        """The scan's measure of the job's goodput (kept, shown, a gauge) and its stragglers."""
        self._ledger.goodput = progress.goodput
        if progress.stragglers is not None:
            self._stragglers.heard(progress.stragglers)
        if progress.goodput.ratio is not None:
            job_goodput(progress.goodput.pool, str(self._input.job), progress.goodput.ratio)
        self._show()

    @JOB_LEDGER.handler
    def ledger(self) -> JobLedger:
        return self._ledger

    @GUARD_STATUS.handler
    def phase(self) -> GuardStatus:
        return GuardStatus(phase=self._phase)

    @workflow.run
    async def run(self, inp: GuardInput) -> GuardResult:
        self._show()
        stragglers = asyncio.create_task(self._stragglers.run())  # for the guard's life
        while True:
            try:
                await workflow.wait_condition(
                    lambda: (
                        bool(self._pending)
                        or self._finished is not None
                        or workflow.info().is_continue_as_new_suggested()
                        or stragglers.done()
                    ),
                    timeout=job_sizes.grow_check(self._ledger, inp.elastic),
                )
            except TimeoutError:  # an elastic job below its maximum: capacity back?
                await self._grow()
                continue
            if stragglers.done():  # it never returns: a bug fails the task, seen, not lost
                stragglers.result()
            if not self._pending:
                if self._finished is not None:
                    return self._end(GuardPhase.FINISHED, self._finished)
                workflow.continue_as_new(inp.model_copy(update={"ledger": self._ledger}))
            if inp.policy.gather > timedelta(0):
                await workflow.sleep(inp.policy.gather, summary="let the other pods report")
            taken, self._pending = sorted(self._pending, key=lambda f: f.failed_at), []
            attributed = list(
                zip(taken, await asyncio.gather(*(self._attribute(f) for f in taken)), strict=True)
            )
            ended = await self._handle(attributed)
            if ended is not None:
                return ended

    async def _attribute(self, failure: PodFailure) -> Attribution:
        return await act.ATTRIBUTE_FAILURE.execute(
            failure,
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"attribute the failure of {failure.pod}",
        )

    async def _handle(self, attributed: list[Attributed]) -> GuardResult | None:
        restarted = self._ledger.restarted_at
        older: list[Attributed] = []
        fresh: list[Attributed] = []
        for fa in attributed:
            (older if restarted and fa[0].failed_at <= restarted else fresh).append(fa)
        # Whichever pod speaks for the failure, every node a rule blamed gets its ladder.
        blamed = {a.blame: (f, a) for f, a in attributed if a.blame}
        for node, (failure, attribution) in blamed.items():
            await self._remediate(node, failure, attribution)
        self._join(
            older, f"a pod of the run restarted at {restarted:%m-%d %H:%M:%S}" if restarted else ""
        )
        if not fresh:
            self._show()
            return None
        lead = min(fresh, key=lambda fa: PRECEDENCE.index(fa[1].verdict))
        decision = self._ledger.decide(lead[1], self._input.policy)
        job_failure(lead[1].verdict.value, decision.action.value)
        return await self._act(fresh, lead, decision)

    async def _act(
        self, fresh: list[Attributed], lead: Attributed, decision: Decision
    ) -> GuardResult | None:
        """Carry the decision out; a hold, or a restart that fails, waits for a person."""
        resumed_by: str | None = None
        while True:
            if decision.action is GuardAction.STOP:
                await self._stop(decision.reason)
                self._settle(fresh, lead, decision)
                return self._end(GuardPhase.STOPPED, decision.reason)
            if decision.action is GuardAction.HOLD:
                resumed = await self._hold(decision.reason)
                if resumed is None or resumed.stop:
                    self._settle(fresh, lead, decision)
                    return (
                        self._end(GuardPhase.FINISHED, self._finished or "")
                        if resumed is None
                        else self._end(GuardPhase.STOPPED, f"stopped by {resumed.who}")
                    )
                decision = Decision(
                    action=GuardAction.RESTART,
                    reason=f"resumed by {resumed.who} after: {decision.reason}",
                )
                resumed_by = resumed.who
            try:
                await self._restart(decision, resumed_by)
            except ActivityError as err:  # a job nobody can restart is held, never left
                decision = Decision(
                    action=GuardAction.HOLD, reason=f"the restart failed: {err.cause or err}"
                )
                continue
            self._settle(fresh, lead, decision)
            self._phase = GuardPhase.WATCHING
            self._show()
            return None

    async def _remediate(self, node: str, failure: PodFailure, attribution: Attribution) -> None:
        """The job is not the only one to suffer from a bad node: make sure a ladder owns it."""
        inp = self._input
        blame = NodeBlame(
            node=NodeRef(name=node),
            job=str(inp.job),
            attribution=attribution,
            failed_at=failure.failed_at,
            node_task_queue=inp.node_task_queue or node_task_queue(node),
            task_queue=inp.controller_task_queue or workflow.info().task_queue,
        )
        await act.REMEDIATE_BLAMED_NODE.execute(
            blame,
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"remediate {node}",
        )

    async def _restart(self, decision: Decision, resumed_by: str | None) -> None:
        self._phase = GuardPhase.RESTARTING
        self._show(decision.reason)
        if decision.delay > timedelta(0):
            await workflow.sleep(
                decision.delay, summary=f"backoff {format_duration(decision.delay)}"
            )
        sizing = await job_sizes.size_for_restart(self._input.job, self._ledger)
        await act.RESTART_JOB.execute(
            RestartRequest(
                job=self._input.job,
                attempt=self._ledger.attempts + 1,
                reason=decision.reason + (f"; {sizing.reason}" if sizing else ""),
                resumed_by=resumed_by,
                size=sizing.size if sizing else None,
            ),
            start_to_close_timeout=timedelta(minutes=2),
            **RIDE_OUT,
            summary=f"restart {self._input.job} from its last checkpoint",
        )
        self._ledger.restarted_at = workflow.now()
        if sizing:
            self._ledger.sized(workflow.now(), sizing.size, sizing.reason)

    async def _grow(self) -> None:
        """Restart an elastic job larger, at a checkpoint it acknowledged, once capacity is
        back; a grow that fails leaves the job as it runs (the next check tries again)."""
        job = self._input.job
        try:
            sizing = await job_sizes.size_to_grow(job, self._ledger, self._input.elastic)
            if sizing is None:
                return
            await act.RESTART_JOB.execute(
                RestartRequest(
                    job=job,
                    attempt=self._ledger.attempts + 1,
                    reason=sizing.reason,
                    size=sizing.size,
                    grow=True,
                ),
                start_to_close_timeout=timedelta(minutes=2),
                **RIDE_OUT,
                summary=f"grow {job} to {sizing.size}",
            )
        except ActivityError as err:
            workflow.logger.warning("could not grow %s: %s", job, err.cause or err)
            return
        self._ledger.restarted_at = workflow.now()
        self._ledger.sized(workflow.now(), sizing.size, sizing.reason, grow=True)
        self._show(sizing.reason)

    async def _stop(self, reason: str) -> None:
        """Keep the job from running again (its own retries too) until a human decides."""
        await act.STOP_JOB.execute(
            StopRequest(job=self._input.job, reason=reason),
            start_to_close_timeout=timedelta(minutes=2),
            **RIDE_OUT,
            summary=f"stop {self._input.job}",
        )

    async def _hold(self, reason: str) -> ResumeRequest | None:
        """Stopped and held until a human resumes (None: the job finished meanwhile)."""
        self._phase = GuardPhase.HELD
        self._show(reason)
        try:
            await self._stop(reason)
        except ActivityError:
            workflow.logger.warning("could not stop %s while it is held", self._input.job)
        await workflow.wait_condition(
            lambda: self._resume is not None or self._finished is not None
        )
        resumed, self._resume = self._resume, None
        return resumed

    def _settle(self, fresh: list[Attributed], lead: Attributed, decision: Decision) -> None:
        """Into the ledger: the time lost runs from the first pod's failure to the restart (or
        the stop); the other pods join the lead's failure."""
        first = min(f.failed_at for f, _ in fresh)
        self._ledger.record(
            Failure(
                at=lead[0].failed_at,
                pod=lead[0].pod,
                attribution=lead[1],
                decision=decision,
                lost=max(workflow.now() - first, timedelta(0)),
            )
        )
        self._join([fa for fa in fresh if fa is not lead], f"failed together with {lead[0].pod}")

    def _join(self, attributed: list[Attributed], why: str) -> None:
        for failure, attribution in attributed:
            self._ledger.record(
                Failure(
                    at=failure.failed_at,
                    pod=failure.pod,
                    attribution=attribution,
                    lost=timedelta(0),
                    decision=Decision(action=GuardAction.JOINED, reason=why),
                )
            )

    def _end(self, phase: GuardPhase, reason: str) -> GuardResult:
        self._phase = phase
        acted = [f for f in self._ledger.failures if f.decision.action is not GuardAction.JOINED]
        cause = acted[-1].attribution.verdict.value if acted else ""
        end = end_of(phase is GuardPhase.FINISHED, reason, cause)
        self._ledger.end = end
        job_ended(end.outcome.value, end.cause)  # once: a guard ends once, replays record none
        self._show(reason)
        return GuardResult(job=self._input.job, phase=phase, reason=reason, ledger=self._ledger)

    def _show(self, note: str = "") -> None:
        ledger = self._ledger
        lines = [f"### job {self._input.job}: {self._phase.value}"]
        if note:
            lines.append(note)
        lines.append(
            " · ".join(
                f"**{v.value}** {ledger.count(v)} failures, {format_duration(ledger.lost(v))} lost"
                for v in Verdict
            )
        )
        if ledger.goodput is not None:
            lines.append(goodput_line(ledger.goodput))
        if ledger.end is not None:
            lines.append(f"ended: {ledger.end.outcome.value} {ledger.end.cause}".rstrip())
        shape = ledger.shape
        if shape is not None and shape.elastic is not None:
            lines.append(f"elastic {shape.elastic}: at {shape.size}, capacity for {shape.fits}")
        if self._phase is GuardPhase.HELD:
            ref = self._input.job
            lines.append(
                f"resume: `remedy resume-job {ref.name} --namespace {ref.namespace}` "
                "(`--stop` to give up)"
            )
        lines += suspicion_lines(ledger)
        lines += [
            f"- {f.at:%m-%d %H:%M} {f.pod}: {f.attribution.verdict.value} "
            f"({f.attribution.rule}) → {f.decision.action.value}"
            for f in ledger.failures[-10:]
        ]
        workflow.set_current_details("\n".join(lines))
        self._index.publish(self._phase)
