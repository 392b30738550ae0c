"""NodeAdmission: a new node takes work only after passing the deep diagnose twice with a gap
between, and only if none of its GPUs is blocklisted.

hold (admission taint) → inventory probe → hardware record check → diagnose → gap → diagnose
→ admit (taint off, validated label, serials). Any failure: record incidents against the GPUs it
blames, mark the node rejected (the taint stays) and hand it to the replace runbook.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.defs import ActivityDef
from contract.messages import ADMISSION_STATE
from workflows.common import RIDE_OUT, this_run
from workflows.fabric_test import fabric_findings

with workflow.unsafe.imports_passed_through():
    from contract.names import NODE_ADMISSION_WORKFLOW
    from remedy.core.durations import format_duration
    from remedy.core.models import ComponentKind, Finding, ProbeReport, ProbeRequest, Severity
    from remedy.ladder.describe import NodeIndex
    from remedy.ladder.hardware import Incident, IncidentReport, SerialsCheck
    from remedy.ladder.intake import RemediationStart
    from remedy.ladder.remediation import FindingReport
    from remedy.scan.admission import (
        ADMISSION_FAILED,
        AdmissionInput,
        AdmissionPhase,
        AdmissionResult,
        AdmissionState,
        AdmissionStep,
        DiagnoseRun,
        diagnose_detail,
        failing_serials,
    )


class _Rejected(Exception):
    def __init__(self, reason: str, serials: list[str]) -> None:
        super().__init__(reason)
        self.reason, self.serials = reason, serials


@workflow.defn(name=NODE_ADMISSION_WORKFLOW)
class NodeAdmission:
    @workflow.init
    def __init__(self, inp: AdmissionInput) -> None:
        self._input = inp
        self._state = AdmissionState(node=inp.node)
        self._indexed: NodeIndex | None = None

    @ADMISSION_STATE.handler
    def state(self) -> AdmissionState:
        return self._state

    @workflow.run
    async def run(self, inp: AdmissionInput) -> AdmissionResult:
        state = self._state
        self._show()
        await self._cluster(act.HOLD_FOR_ADMISSION, AdmissionStep(node=inp.node))
        try:
            await self._check_record()
            for n in range(inp.policy.passes):
                if n:
                    state.phase = AdmissionPhase.WAITING_GAP
                    gap = format_duration(inp.policy.gap)
                    await workflow.sleep(
                        inp.policy.gap, summary=f"gap of {gap} before diagnose {n + 1}"
                    )
                await self._diagnose(n + 1)
            await self._fabric()
        except _Rejected as rejected:
            await self._reject(rejected)
        else:
            await self._cluster(act.ADMIT, AdmissionStep(node=inp.node, serials=state.serials))
            state.phase = AdmissionPhase.ADMITTED
            state.reason = f"passed {inp.policy.passes} deep diagnoses"
        self._show()
        return AdmissionResult(
            node=inp.node.name,
            admitted=state.phase is AdmissionPhase.ADMITTED,
            reason=state.reason,
            serials=state.serials,
            diagnoses=state.diagnoses,
        )

    async def _check_record(self) -> None:
        """Inventory first: a blocklisted GPU is turned away before any diagnose runs."""
        state = self._state
        self._show()
        inventory = await self._host(act.PROBE, timedelta(minutes=2))
        state.gpus = [g for g in inventory.gpus if g.kind is ComponentKind.GPU]
        if not inventory.checks_run:
            raise _Rejected("the probe could not run: " + diagnose_detail(inventory), [])
        answer = await act.BLOCKED_SERIALS.execute(
            SerialsCheck(serials=state.serials),
            start_to_close_timeout=timedelta(seconds=60),
            **RIDE_OUT,
            summary=f"hardware record of {len(state.serials)} GPUs",
        )
        blocked = answer.blocked
        if blocked:
            raise _Rejected("blocklisted: " + "; ".join(b.reason for b in blocked), [])

    async def _diagnose(self, n: int) -> None:
        state = self._state
        state.phase = AdmissionPhase.DIAGNOSING
        self._show()
        report = await self._host(act.DEEP_DIAGNOSE, self._input.policy.diagnose_timeout)
        detail = diagnose_detail(report)
        state.diagnoses.append(
            DiagnoseRun(at=workflow.now(), healthy=report.healthy, detail=detail)
        )
        if not report.healthy:
            raise _Rejected(
                f"deep diagnose {n} of {self._input.policy.passes} failed: {detail}",
                failing_serials(report),
            )

    async def _fabric(self) -> None:
        """The fabric tests, once every diagnose passed (none unless the policy asks)."""
        policy, state = self._input.policy.fabric, self._state
        if not policy.tests:
            return
        state.phase = AdmissionPhase.DIAGNOSING
        self._show()
        found = await fabric_findings(state.node.name, policy)
        bad = [f for f in found if f.unhealthy]
        detail = "; ".join(f.evidence for f in (bad or found))
        state.diagnoses.append(DiagnoseRun(at=workflow.now(), healthy=not bad, detail=detail))
        if bad:
            raise _Rejected(f"fabric tests failed: {detail}", [])

    async def _reject(self, rejected: _Rejected) -> None:
        state, inp = self._state, self._input
        state.phase, state.reason = AdmissionPhase.REJECTED, rejected.reason
        workflow.logger.warning("%s rejected: %s", inp.node.name, rejected.reason)
        if rejected.serials:
            await act.RECORD_INCIDENTS.execute(
                IncidentReport(
                    serials=rejected.serials,
                    incident=Incident(
                        at=workflow.now(),
                        node=inp.node.name,
                        fault=ADMISSION_FAILED,
                        outcome="admission_failed",
                        source=this_run(),
                    ),
                ),
                start_to_close_timeout=timedelta(seconds=60),
                **RIDE_OUT,
                summary=f"record incidents of {len(rejected.serials)} GPUs",
            )
        await self._cluster(act.REJECT, AdmissionStep(node=inp.node, reason=rejected.reason))
        if inp.failure_runbook is None:
            return  # no replace runbook: the taint keeps it out of work until a human acts
        finding = Finding(
            node=inp.node.name,
            check="admission",
            reason=ADMISSION_FAILED,
            severity=Severity.CRITICAL,
            evidence=rejected.reason[:1024],
            observed_at=workflow.now(),
        )
        started = await act.START_REMEDIATION.execute(
            RemediationStart(
                node=inp.node,
                report=FindingReport(finding=finding, runbook=inp.failure_runbook),
                node_task_queue=inp.node_task_queue,
                task_queue=workflow.info().task_queue,
            ),
            start_to_close_timeout=timedelta(seconds=60),
            **RIDE_OUT,
            summary=f"hand {inp.node.name} to {inp.failure_runbook.name}",
        )
        state.remediation = started.workflow_id

    async def _host(
        self, step: ActivityDef[ProbeRequest, ProbeReport], timeout: timedelta
    ) -> ProbeReport:
        """A probe on the node; one that cannot run (dead agent) is a failed check."""
        inp = self._input
        try:
            return await step.execute(
                ProbeRequest(node=inp.node),
                task_queue=inp.node_task_queue,
                schedule_to_start_timeout=inp.node_pickup_timeout,
                start_to_close_timeout=timeout,
                retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=5)),
                summary=f"{step.name.replace('_', ' ')} {inp.node.name}",
            )
        except ActivityError as err:
            raise _Rejected(
                f"{step.name} could not run on the node: {err.cause or err}", []
            ) from None

    async def _cluster(self, step: ActivityDef[AdmissionStep, None], arg: AdmissionStep) -> None:
        await step.execute(
            arg,
            start_to_close_timeout=timedelta(seconds=60),
            **RIDE_OUT,
            summary=f"{step.name.replace('_', ' ')} {arg.node.name}",
        )

    def _show(self) -> None:
        state = self._state
        done = ", ".join(("pass" if d.healthy else "FAIL") for d in state.diagnoses) or "none yet"
        workflow.set_current_details(
            f"**{state.node.name}** admission: {state.phase.value}\n\n"
            f"diagnoses: {done} (of {self._input.policy.passes})\n\n"
            f"GPUs: {', '.join(state.serials) or 'not inventoried yet'}"
            + (f"\n\n**{state.reason}**" if state.reason else "")
        )
