"""NodeRemediation: one durable workflow per node that walks a runbook's escalation ladder.

cordon (if the runbook says so) → tolerance window (ends early on `clear` or a clean re-probe)
→ for each rung: approval if required → action → settle → verify by probe → stop at the first
rung that leaves the node healthy and restore it. Past the last rung the node stays cordoned and
the outcome is "needs a human". Deterministic: time comes from workflow.now(), side effects from
activities only.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout

from contract import search_attributes
from workflows import metrics
from workflows.common import PERMANENT_ERRORS, QUICK_RETRY, this_run

with workflow.unsafe.imports_passed_through():
    from contract.names import NODE_REMEDIATION_WORKFLOW, budget_workflow_id
    from remedy.actions import ACTIONS, Where
    from remedy.budget import LeaseRelease, LeaseRequest, UnhealthyReport
    from remedy.describe import NodeIndex, remediation_details, remediation_index
    from remedy.durations import format_duration
    from remedy.hardware import Incident, IncidentReport
    from remedy.models import (
        Action,
        ActionRequest,
        ActionResult,
        BootRequest,
        ConditionsUpdate,
        CordonResult,
        CordonState,
        Finding,
        NodeBoot,
        ProbeReport,
        ProbeRequest,
        Severity,
    )
    from remedy.remediation import (
        AbortRequest,
        Approval,
        ApproveRequest,
        Attempt,
        AttemptResult,
        ClearRequest,
        FindingReport,
        Outcome,
        Phase,
        RemediationInput,
        RemediationResult,
        RemediationState,
    )
    from remedy.runbook.schema import Approval as ApprovalMode
    from remedy.runbook.schema import Cause, Rung

FIRST_REPORT_TIMEOUT = timedelta(minutes=5)
CONFIRM_REBOOT = "confirm-reboot-from-boot-id"  # workflow.patched: runs started before it differ
RELEASE_GPUS = "release-gpu-operands-for-reset"
DISRUPTION_BUDGET = "disruption-budget-leases"
HARDWARE_RECORD = "hardware-record-incidents"
PUBLISH_CONDITIONS = "publish-conditions-on-recovery"
# Outcomes that count against the GPU: a fault that cleared by itself, or an abort, does not.
INCIDENT_OUTCOMES = (Outcome.RECOVERED, Outcome.REPLACED, Outcome.NEEDS_HUMAN)


class _Stop(Exception):
    """The ladder ends with this outcome."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


@workflow.defn(name=NODE_REMEDIATION_WORKFLOW)
class NodeRemediation:
    @workflow.init
    def __init__(self, inp: RemediationInput) -> None:
        self._input = inp
        self._state = inp.state or RemediationState(node=inp.node)
        self._runbook_changed = False
        self._stop_request: AbortRequest | ClearRequest | None = None
        self._indexed: NodeIndex | None = None  # what the search attributes say now

    # -- messages --------------------------------------------------------------------------
    @workflow.signal(name="report_finding")
    def report_finding(self, report: FindingReport) -> None:
        state = self._state
        state.record_finding(report.finding)
        if state.phase in (Phase.WAITING, Phase.TOLERATING) and state.outranks_trigger(report):
            state.runbook, state.trigger = report.runbook, report.finding
            self._runbook_changed = True
        self._publish()

    @workflow.signal(name="lease_granted")
    def lease_granted(self, pool: str) -> None:
        self._state.lease_granted_at = self._state.lease_granted_at or workflow.now()
        self._publish()

    @workflow.signal(name="approve")
    def approve(self, req: ApproveRequest) -> None:
        rung = req.rung if req.rung is not None else self._state.rung
        if not self._state.approved(rung):
            self._state.approvals.append(
                Approval(rung=rung, by=req.by, at=workflow.now(), note=req.note)
            )
            self._publish()

    @workflow.signal(name="clear")
    def clear(self, req: ClearRequest) -> None:
        self._stop_request = self._stop_request or req

    @workflow.signal(name="abort")
    def abort(self, req: AbortRequest) -> None:
        self._stop_request = self._stop_request or req

    @workflow.query(name="state")
    def state(self) -> RemediationState:
        return self._state

    # -- the run ---------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: RemediationInput) -> RemediationResult:
        ladder = asyncio.create_task(self._remediate())
        await workflow.wait_condition(lambda: ladder.done() or self._stop_request is not None)
        if not ladder.done():
            ladder.cancel()
        try:
            outcome, detail = await ladder
        except asyncio.CancelledError:
            outcome, detail = await self._on_stop_request()
        return await self._finish(outcome, detail)

    async def _remediate(self) -> tuple[Outcome, str]:
        state = self._state
        try:
            if state.runbook is None:
                await self._wait_for_first_report()
            if state.phase is Phase.WAITING:
                await self._begin()
            if state.phase is Phase.TOLERATING:
                await self._tolerate()
                self._enter(Phase.ACTING)
            return await self._climb()
        except _Stop as stop:
            if stop.outcome is Outcome.CLEARED:
                await self._restore()  # the fault went away: give back what remedy took
            return stop.outcome, stop.detail

    async def _wait_for_first_report(self) -> None:
        try:
            await workflow.wait_condition(
                lambda: self._state.runbook is not None,
                timeout=FIRST_REPORT_TIMEOUT,
                timeout_summary="wait for the first finding",
            )
        except TimeoutError:
            raise _Stop(Outcome.CLEARED, "started without a finding; nothing to do") from None

    async def _begin(self) -> None:
        state = self._state
        assert state.runbook is not None and state.trigger is not None
        now = workflow.now()
        state.started_at = now
        state.tolerance_ends_at = now + state.runbook.tolerance
        workflow.logger.info(
            "%s: %s → runbook %s", state.node.name, state.trigger.headline(), state.runbook.name
        )
        if state.runbook.cordon:
            await self._cordon("finding: " + state.trigger.headline())
        if workflow.patched(DISRUPTION_BUDGET):
            await self._budget_call(
                "report_unhealthy",
                UnhealthyReport(
                    node=state.node.name,
                    pool=state.node.pool,
                    pool_size=0,
                    task_queue=workflow.info().task_queue,
                    at=now,
                ),
            )
        self._enter(Phase.TOLERATING)

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
                if wake < state.tolerance_ends_at and (await self._probe()).healthy:
                    raise _Stop(
                        Outcome.CLEARED, "clean re-probe inside the tolerance window"
                    ) from None
                continue
            await self._adopt_new_runbook()
        waited = state.runbook is not None and state.runbook.tolerance > timedelta(0)
        if waited and (await self._probe()).healthy:
            raise _Stop(Outcome.CLEARED, "the fault cleared within the tolerance window")
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
            await self._cordon("finding: " + (state.trigger.headline() if state.trigger else ""))

    async def _climb(self) -> tuple[Outcome, str]:
        state = self._state
        assert state.runbook is not None
        ladder = state.runbook.ladder
        while state.rung < len(ladder):
            self._continue_as_new_if_suggested()
            rung = ladder[state.rung]
            if await self._climb_rung(state.rung, rung):
                if rung.action is Action.REPLACE:
                    return Outcome.REPLACED, state.attempts[-1].detail
                await self._restore()
                return Outcome.RECOVERED, f"healthy after {rung.action.value}"
            state.rung += 1
        await self._hold_cordoned()
        tried = ", ".join(r.action.value for r in ladder) or "no rungs"
        return Outcome.NEEDS_HUMAN, f"still unhealthy after the whole ladder ({tried})"

    async def _climb_rung(self, index: int, rung: Rung) -> bool:
        """Run one rung; True when the node is healthy (or replaced) and climbing stops."""
        state = self._state
        if rung.approval is ApprovalMode.REQUIRED and not state.approved(index):
            await self._await_approval(index, rung)
        if ACTIONS[rung.action].disruptive and workflow.patched(DISRUPTION_BUDGET):
            await self._hold_lease()
        started = workflow.now()
        self._enter(Phase.ACTING)
        try:
            if rung.action is Action.REBOOT and workflow.patched(CONFIRM_REBOOT):
                result = await self._reboot(rung)
            elif rung.action is Action.RESET_GPU and workflow.patched(RELEASE_GPUS):
                result = await self._reset(rung)
            else:
                result = await self._act(rung)
        except ActivityError as err:
            self._record(index, rung.action, started, AttemptResult.FAILED, _cause(err))
            return False
        if not result.ok:
            self._record(index, rung.action, started, AttemptResult.FAILED, result.detail)
            return False
        if not rung.verifies:
            self._record(index, rung.action, started, AttemptResult.DONE, result.detail)
            return rung.action is Action.REPLACE
        if rung.settle > timedelta(0):
            self._enter(Phase.SETTLING)
            await workflow.sleep(
                rung.settle,
                summary=f"settle {format_duration(rung.settle)} after {rung.action.value}",
            )
        self._enter(Phase.VERIFYING)
        report = await self._probe()
        verdict = AttemptResult.VERIFIED if report.healthy else AttemptResult.UNVERIFIED
        self._record(index, rung.action, started, verdict, _summary(result, report))
        return report.healthy

    async def _await_approval(self, index: int, rung: Rung) -> None:
        state = self._state
        self._enter(Phase.AWAITING_APPROVAL)
        asked = workflow.now()
        try:
            await workflow.wait_condition(
                lambda: state.approved(index),
                timeout=rung.approval_timeout,
                timeout_summary=f"approval for {rung.action.value} "
                f"(times out in {format_duration(rung.approval_timeout)})",
            )
        except TimeoutError:
            detail = (
                f"no approval for {rung.action.value} within "
                f"{format_duration(rung.approval_timeout)}"
            )
            self._record(index, rung.action, asked, AttemptResult.APPROVAL_TIMED_OUT, detail)
            await self._hold_cordoned()
            raise _Stop(Outcome.NEEDS_HUMAN, detail) from None

    # -- activities ------------------------------------------------------------------------
    def _request(self, action: Action, reason: str = "") -> ActionRequest:
        state = self._state
        gpus = sorted(
            dict.fromkeys(
                f.component.index
                for f in state.findings
                if f.unhealthy and f.component.index is not None
            )
        )
        return ActionRequest(
            node=state.node,
            action=action,
            workflow_id=workflow.info().workflow_id,
            reason=reason or (state.runbook.name if state.runbook else ""),
            gpu_indices=gpus,
        )

    async def _act(self, rung: Rung) -> ActionResult:
        retry = RetryPolicy(
            initial_interval=rung.retry.initial_interval,
            backoff_coefficient=rung.retry.backoff,
            maximum_interval=max(rung.retry.max_interval, rung.retry.initial_interval),
            maximum_attempts=rung.retry.max_attempts,
            non_retryable_error_types=PERMANENT_ERRORS,
        )
        host_local = ACTIONS[rung.action].where is Where.NODE
        result: ActionResult = await workflow.execute_activity(
            rung.action.value,
            self._request(rung.action),
            result_type=ActionResult,
            task_queue=self._input.node_task_queue if host_local else None,
            schedule_to_start_timeout=self._input.node_pickup_timeout if host_local else None,
            start_to_close_timeout=rung.timeout,
            heartbeat_timeout=min(rung.timeout, timedelta(minutes=1))
            if rung.action is Action.DRAIN
            else None,
            retry_policy=retry,
            summary=f"{rung.action.value} {self._state.node.name}",
        )
        return result

    async def _hold_lease(self) -> None:
        """Wait for the pool's disruption budget to grant this node a lease (kept until the
        remediation ends). While the storm breaker is tripped, the wait goes on."""
        state = self._state
        if state.lease_granted_at:
            return
        if state.lease_requested_at is None:
            state.lease_requested_at = workflow.now()
            await self._budget_call(
                "request_lease",
                LeaseRequest(
                    holder=workflow.info().workflow_id,
                    node=state.node.name,
                    pool=state.node.pool,
                    pool_size=0,
                    task_queue=workflow.info().task_queue,
                ),
            )
        self._enter(Phase.AWAITING_LEASE)
        await workflow.wait_condition(
            lambda: state.lease_granted_at is not None, timeout_summary="disruption lease"
        )

    async def _release_lease(self) -> None:
        state = self._state
        if state.lease_requested_at is None or state.lease_released_at is not None:
            return
        try:
            await workflow.get_external_workflow_handle(budget_workflow_id(state.node.pool)).signal(
                "release", LeaseRelease(holder=workflow.info().workflow_id)
            )
        except Exception:  # noqa: BLE001 - a budget that is gone holds no lease to give back
            workflow.logger.warning("could not release the lease of %s", state.node.name)
        state.lease_released_at = workflow.now()

    async def _budget_call(self, name: str, arg: LeaseRequest | UnhealthyReport) -> None:
        await workflow.execute_activity(
            name,
            arg,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=QUICK_RETRY,
            summary=f"{name.replace('_', ' ')} (pool {self._state.node.pool})",
        )

    async def _reset(self, rung: Rung) -> ActionResult:
        """The cluster's own GPU pods (device plugin, DCGM) hold the GPU too: stop them for
        the reset and always let them back, whatever the reset did."""
        await self._cluster_step("release_gpus", rung.timeout)
        try:
            result = await self._act(rung)
        except (ActivityError, asyncio.CancelledError):
            await self._return_gpus()
            raise
        # Not a `finally`: when a worker evicts the workflow from its cache, the coroutine is
        # closed with GeneratorExit, and an activity scheduled then (outside the workflow's
        # event loop) fails the close. The replay on the next worker gives the GPUs back.
        await self._return_gpus()
        return result

    async def _return_gpus(self) -> None:
        await self._cluster_step("return_gpus", timedelta(minutes=2))

    async def _cluster_step(self, name: str, timeout: timedelta) -> ActionResult:
        result: ActionResult = await workflow.execute_activity(
            name,
            self._request(Action.RESET_GPU, name),
            result_type=ActionResult,
            start_to_close_timeout=timeout,
            retry_policy=QUICK_RETRY,
            summary=f"{name.replace('_', ' ')} on {self._state.node.name}",
        )
        return result

    async def _reboot(self, rung: Rung) -> ActionResult:
        """Reboot on the node, confirmed from the cluster: a new boot id and Ready again.
        The agent may go down before it answers, so a reboot activity that started and then
        timed out is not a failure on its own; one that nobody picked up is."""
        node = self._state.node
        before: NodeBoot = await workflow.execute_activity(
            "boot_id",
            BootRequest(node=node),
            result_type=NodeBoot,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=QUICK_RETRY,
            summary=f"boot id of {node.name}",
        )
        try:
            await self._act(rung)
        except ActivityError as err:
            cause = err.cause
            if not (
                isinstance(cause, ActivityTimeout)
                and cause.type is not TimeoutType.SCHEDULE_TO_START
            ):
                raise
        confirmed: ActionResult = await workflow.execute_activity(
            "confirm_reboot",
            BootRequest(node=node, previous_boot_id=before.boot_id),
            result_type=ActionResult,
            start_to_close_timeout=rung.timeout,
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
            summary=f"wait for {node.name} to come back",
        )
        return confirmed

    async def _probe(self) -> ProbeReport:
        """Re-probe on the node. A probe that cannot run is an unhealthy report (fail closed)."""
        self._state.last_probe = await self._probe_once()
        return self._state.last_probe

    async def _probe_once(self) -> ProbeReport:
        state = self._state
        try:
            report: ProbeReport = await workflow.execute_activity(
                "probe",
                ProbeRequest(node=state.node),
                result_type=ProbeReport,
                task_queue=self._input.node_task_queue,
                schedule_to_start_timeout=self._input.node_pickup_timeout,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=5)),
                summary=f"probe {state.node.name}",
            )
            return report
        except ActivityError as err:
            unavailable = Finding(
                node=state.node.name,
                check="probe",
                reason="ProbeUnavailable",
                severity=Severity.CRITICAL,
                evidence=_cause(err),
                observed_at=workflow.now(),
            )
            return ProbeReport(
                node=state.node.name,
                checks_run=[],
                findings=[unavailable],
                started_at=workflow.now(),
            )

    async def _cordon(self, reason: str) -> None:
        state = self._state
        started = workflow.now()
        try:
            result = await workflow.execute_activity(
                "cordon",
                self._request(Action.CORDON, reason),
                result_type=CordonResult,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=QUICK_RETRY,
                summary=f"cordon {state.node.name}",
            )
        except ActivityError as err:
            self._record(-1, Action.CORDON, started, AttemptResult.FAILED, _cause(err))
            return
        state.cordon = result.state
        if result.state is CordonState.CORDONED:
            metrics.node_cordoned(state.node.pool)
        self._record(-1, Action.CORDON, started, AttemptResult.DONE, result.state.value)

    async def _hold_cordoned(self) -> None:
        """A node nobody could fix must not take work, whether or not the runbook cordoned."""
        if self._state.cordon is None:
            await self._cordon("needs a human")

    async def _restore(self) -> None:
        state = self._state
        if not state.cordoned_by_remedy:
            return  # never undo a cordon someone else set
        self._enter(Phase.RESTORING)
        started = workflow.now()
        try:
            result = await workflow.execute_activity(
                "restore",
                self._request(Action.RESTORE, "recovered"),
                result_type=ActionResult,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=QUICK_RETRY,
                summary=f"restore {state.node.name}",
            )
        except ActivityError as err:
            # Still cordoned, still annotated as remedy's: owned, and visible in the outcome.
            self._record(-1, Action.RESTORE, started, AttemptResult.FAILED, _cause(err))
            return
        self._record(-1, Action.RESTORE, started, AttemptResult.DONE, result.detail)

    # -- endings ---------------------------------------------------------------------------
    async def _on_stop_request(self) -> tuple[Outcome, str]:
        req = self._stop_request
        if isinstance(req, ClearRequest):
            await self._restore()
            return Outcome.CLEARED, f"cleared by {req.by}" + (
                f": {req.reason}" if req.reason else ""
            )
        assert isinstance(req, AbortRequest)
        if req.restore:
            await self._restore()
        left = "restored" if req.restore else "left as it is"
        return Outcome.ABORTED, f"aborted by {req.by}: {req.reason} (node {left})"

    async def _finish(self, outcome: Outcome, detail: str) -> RemediationResult:
        state = self._state
        await self._release_lease()
        if workflow.patched(HARDWARE_RECORD):
            await self._record_incidents(outcome)
        if workflow.patched(PUBLISH_CONDITIONS):
            await self._publish_healthy()
        last = state.attempts[-1] if state.attempts else None
        if last and last.action is Action.RESTORE and last.result is AttemptResult.FAILED:
            detail += "; could not uncordon: the node stays cordoned and marked as remedy's"
        state.outcome, state.outcome_detail = outcome, detail
        self._enter(Phase.DONE)
        metrics.remediation_finished(
            state.node.pool, state.runbook.name if state.runbook else "", outcome.value
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.logger.info("%s: %s — %s", state.node.name, outcome.value, detail)
        return RemediationResult(
            node=state.node.name,
            outcome=outcome,
            detail=detail,
            runbook=state.runbook.name if state.runbook else None,
            attempts=state.attempts,
        )

    async def _publish_healthy(self) -> None:
        """A verified-clean probe ended the ladder: say so in the node's conditions now, not at
        the agent's next round, or the fleet scan would start a second ladder on the old ones."""
        state = self._state
        probe = state.last_probe
        if probe is None or not probe.healthy:
            return
        try:
            await workflow.execute_activity(
                "publish_conditions",
                ConditionsUpdate(node=state.node, report=probe),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=QUICK_RETRY,
                summary=f"conditions of {state.node.name}: healthy",
            )
        except ActivityError as err:  # the agent's next round publishes them anyway
            workflow.logger.warning("could not publish conditions: %s", err)

    async def _record_incidents(self, outcome: Outcome) -> None:
        """Count a platform fault against every GPU serial it named (repeat offenders)."""
        state = self._state
        if (
            outcome not in INCIDENT_OUTCOMES
            or state.runbook is None
            or state.trigger is None
            or state.runbook.cause is not Cause.PLATFORM
        ):
            return
        serials = sorted(
            dict.fromkeys(
                f.component.serial for f in state.findings if f.unhealthy and f.component.serial
            )
        )
        if not serials:
            return
        incident = Incident(
            at=workflow.now(),
            node=state.node.name,
            fault=state.trigger.headline(),
            outcome=outcome.value,
            source=this_run(),
        )
        try:
            await workflow.execute_activity(
                "record_incidents",
                IncidentReport(serials=serials, incident=incident),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=QUICK_RETRY,
                summary=f"hardware record of {', '.join(serials)}",
            )
        except ActivityError as err:  # the node's outcome stands; the record is best effort
            workflow.logger.warning("could not record incidents for %s: %s", serials, err)

    # -- what the UI and `remedy status` see -------------------------------------------------
    def _enter(self, phase: Phase) -> None:
        self._state.phase, self._state.phase_since = phase, workflow.now()
        self._publish()

    def _publish(self) -> None:
        """Keep the UI's current details and the search attributes in step with the state.
        Upserts are commands, so only on a change, and only in runs that know the patch."""
        state = self._state
        workflow.set_current_details(remediation_details(state))
        last = self._indexed
        index = remediation_index(state, since=state.phase_since)
        if last is not None and (index.phase, index.rung) == (last.phase, last.rung):
            index.phase_since = last.phase_since  # a rung's settle or verify: same phase
        if index != self._indexed and workflow.patched(search_attributes.PATCH):
            workflow.upsert_search_attributes(search_attributes.updates(index))
            self._indexed = index

    def _continue_as_new_if_suggested(self) -> None:
        if workflow.info().is_continue_as_new_suggested() and self._stop_request is None:
            state = self._state.model_copy(update={"runs": self._state.runs + 1})
            workflow.continue_as_new(self._input.model_copy(update={"state": state}))

    def _record(
        self, rung: int, action: Action, started: datetime, result: AttemptResult, detail: str
    ) -> None:
        self._state.attempts.append(
            Attempt(
                rung=rung,
                action=action,
                started_at=started,
                finished_at=workflow.now(),
                result=result,
                detail=detail,
            )
        )
        metrics.rung_finished(
            self._state.node.pool,
            action.value,
            result.value,
            (workflow.now() - started).total_seconds(),
        )
        self._publish()


def _cause(err: ActivityError) -> str:
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause else str(err)


def _summary(result: ActionResult, report: ProbeReport) -> str:
    if report.healthy:
        return f"{result.detail}; probe clean"
    left = ", ".join(f.headline() for f in report.findings if f.unhealthy) or "probe could not run"
    return f"{result.detail}; still unhealthy: {left}"
