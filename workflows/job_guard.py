"""JobGuard: one workflow per guarded job. Each pod failure (the `pod_failed` signal) is
attributed — platform, application or unknown, with its evidence — and acted on: a platform
failure puts the blamed node in remediation and restarts the job from its last checkpoint after
a backoff, up to a cap; an application failure stops the guard (no restart); an unknown one is
retried once, then held for a human (`resume`). The ledger of failures and time lost per verdict
is the query `ledger` and the workflow's current details."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from workflows.common import QUICK_RETRY

with workflow.unsafe.imports_passed_through():
    from remedy.attribution.guard import (
        Decision,
        Failure,
        GuardAction,
        GuardInput,
        GuardPhase,
        GuardResult,
        JobLedger,
        NodeBlame,
        RestartRequest,
        ResumeRequest,
    )
    from remedy.attribution.model import Attribution, PodFailure, Verdict
    from remedy.durations import format_duration
    from remedy.models import NodeRef
    from remedy.names import JOB_GUARD_WORKFLOW, node_task_queue


@workflow.defn(name=JOB_GUARD_WORKFLOW)
class JobGuard:
    @workflow.init
    def __init__(self, inp: GuardInput) -> None:
        self._input = inp
        self._ledger = inp.ledger or JobLedger(job=str(inp.job))
        self._pending: list[PodFailure] = []
        self._seen = [(f.pod, f.at) for f in self._ledger.failures]
        self._resume: ResumeRequest | None = None
        self._phase = GuardPhase.WATCHING

    @workflow.signal(name="pod_failed")
    def pod_failed(self, failure: PodFailure) -> None:
        # A watcher may report the same failed pod again: it counts once.
        key = (failure.pod, failure.failed_at)
        if key not in self._seen:
            self._seen.append(key)
            self._pending.append(failure)

    @workflow.signal(name="resume")
    def resume(self, req: ResumeRequest) -> None:
        self._resume = req

    @workflow.query(name="ledger")
    def ledger(self) -> JobLedger:
        return self._ledger

    @workflow.query(name="phase")
    def phase(self) -> GuardPhase:
        return self._phase

    @workflow.run
    async def run(self, inp: GuardInput) -> GuardResult:
        self._show()
        while True:
            await workflow.wait_condition(lambda: bool(self._pending))
            failure = self._pending.pop(0)
            attribution: Attribution = await workflow.execute_activity(
                "attribute_failure", failure, result_type=Attribution,
                start_to_close_timeout=timedelta(seconds=30), retry_policy=QUICK_RETRY,
                summary=f"attribute the failure of {failure.pod}")
            decision = self._ledger.decide(attribution, inp.policy)
            if attribution.verdict is Verdict.PLATFORM:
                await self._remediate(failure, attribution)
            if decision.action is GuardAction.STOP:
                self._settle(failure, attribution, decision)
                return self._end(GuardPhase.STOPPED, decision.reason)
            if decision.action is GuardAction.HOLD:
                self._phase = GuardPhase.HELD
                self._show(decision.reason)
                await workflow.wait_condition(lambda: self._resume is not None)
                resumed, self._resume = self._resume, None
                assert resumed is not None
                if resumed.stop:
                    self._settle(failure, attribution, decision)
                    return self._end(GuardPhase.STOPPED, f"stopped by {resumed.by}")
                decision = Decision(action=GuardAction.RESTART,
                                    reason=f"resumed by {resumed.by} after: {decision.reason}")
            await self._restart(failure, attribution, decision)

    async def _remediate(self, failure: PodFailure, attribution: Attribution) -> None:
        """The job is not the only one to suffer from a bad node: make sure a ladder owns it."""
        inp = self._input
        blame = NodeBlame(node=NodeRef(name=failure.node), job=str(inp.job),
                          attribution=attribution,
                          node_task_queue=inp.node_task_queue or node_task_queue(failure.node),
                          task_queue=inp.controller_task_queue or workflow.info().task_queue)
        await workflow.execute_activity(
            "remediate_blamed_node", blame, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=QUICK_RETRY, summary=f"remediate {failure.node}")

    async def _restart(self, failure: PodFailure, attribution: Attribution,
                       decision: Decision) -> None:
        self._phase = GuardPhase.RESTARTING
        self._show(decision.reason)
        if decision.delay > timedelta(0):
            await workflow.sleep(decision.delay,
                                 summary=f"backoff {format_duration(decision.delay)}")
        restarts = sum(1 for f in self._ledger.failures
                       if f.decision.action is GuardAction.RESTART)
        await workflow.execute_activity(
            "restart_job", RestartRequest(job=self._input.job, attempt=restarts + 1,
                                          reason=decision.reason),
            start_to_close_timeout=timedelta(minutes=2), retry_policy=QUICK_RETRY,
            summary=f"restart {self._input.job} from its last checkpoint")
        self._settle(failure, attribution, decision)
        self._phase = GuardPhase.WATCHING
        self._show()

    def _settle(self, failure: PodFailure, attribution: Attribution,
                decision: Decision) -> None:
        """Into the ledger: the time lost runs from the failure to the restart (or the stop)."""
        self._ledger.record(Failure(at=failure.failed_at, pod=failure.pod,
                                    attribution=attribution, decision=decision,
                                    lost=max(workflow.now() - failure.failed_at,
                                             timedelta(0))))

    def _end(self, phase: GuardPhase, reason: str) -> GuardResult:
        self._phase = phase
        self._show(reason)
        return GuardResult(job=self._input.job, phase=phase, reason=reason,
                           ledger=self._ledger)

    def _show(self, note: str = "") -> None:
        ledger = self._ledger
        lines = [f"### job {self._input.job}: {self._phase.value}"]
        if note:
            lines.append(note)
        lines.append(" · ".join(f"**{v.value}** {ledger.count(v)} failures, "
                                f"{format_duration(ledger.lost(v))} lost" for v in Verdict))
        if self._phase is GuardPhase.HELD:
            lines.append("resume: signal `resume` with `{\"by\": \"you\"}` "
                         "(`\"stop\": true` to give up)")
        lines += [f"- {f.at:%m-%d %H:%M} {f.pod}: {f.attribution.verdict.value} "
                  f"({f.attribution.rule}) → {f.decision.action.value}"
                  for f in ledger.failures[-10:]]
        workflow.set_current_details("\n".join(lines))
