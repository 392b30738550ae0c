"""ActiveCheck: one node's scheduled deep diagnose (a child of its pool's ActiveChecks round).

idle node: cordon (no job lands on GPUs under load) → deep diagnose → uncordon on a pass.
busy node past its max age: a lease from the pool's DisruptionBudget first (no lease within
the wait: give the request back, the next round asks again), then cordon → drain → diagnose.
The verdict becomes the node's GpuActiveCheck condition and a metric; a failure goes to the
node's ladder with its findings, and the cordon stays for that ladder (its cordon finds it
remedy's and gives the node back when it recovers).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.messages import CHECK_LEASE_GRANTED, LEASE_RELEASE, PAIR_READY, PAIR_VERDICT
from contract.search_attributes import LEASE
from workflows import metrics
from workflows.common import PATIENT_RETRY, RIDE_OUT, cause_of, other_repairer, permanent
from workflows.fabric_test import fabric_findings

with workflow.unsafe.imports_passed_through():
    from contract.names import (
        ACTIVE_CHECK_WORKFLOW,
        budget_workflow_id,
        remediation_workflow_id,
    )
    from remedy.core.models import (
        Action,
        ActionRequest,
        CordonState,
        Finding,
        ProbeReport,
        ProbeRequest,
        Severity,
    )
    from remedy.detection.fabric.verdict import FABRIC
    from remedy.detection.probe.runner import PROBE, UNAVAILABLE
    from remedy.disruption.budget import LeaseGrant, LeaseRelease, LeaseWanted
    from remedy.scan.active_checks import (
        ActiveCheckPublish,
        CheckFailure,
        CheckResult,
        NodeCheckInput,
        NodeCheckResult,
    )
    from remedy.scan.fabric import PairReady, PairVerdict
    from remedy.scan.fleet import NodeNames

CLUSTER_CALL = timedelta(seconds=60)


class _Done(Exception):
    def __init__(self, result: CheckResult, detail: str) -> None:
        super().__init__(detail)
        self.result, self.detail = result, detail


@workflow.defn(name=ACTIVE_CHECK_WORKFLOW)
class ActiveCheck:
    @workflow.init
    def __init__(self, inp: NodeCheckInput) -> None:
        self._inp = inp
        self._granted = False
        self._asked = False
        self._cordoned = False
        self._pairs: PairVerdict | None = None

    @PAIR_VERDICT.handler
    def pair_verdict(self, verdict: PairVerdict) -> None:
        self._pairs = verdict

    @CHECK_LEASE_GRANTED.handler
    def lease_granted(self, grant: LeaseGrant) -> None:
        if self._asked and not self._granted:
            self._granted = True
            # A budget run started afresh finds the holders by this (activities/budget.py).
            workflow.upsert_search_attributes([LEASE.value_set("held")])

    @workflow.run
    async def run(self, inp: NodeCheckInput) -> NodeCheckResult:
        node = inp.node
        result = NodeCheckResult(node=node.name, result=CheckResult.PASSED)
        try:
            if inp.take_out:
                await self._hold_lease()
            await self._cordon()
            if inp.take_out:
                await self._drain()
            report = await self._diagnose()
            if report.healthy and inp.policy.fabric.tests:
                report = await self._fabric(report)
            if inp.paired:
                report = await self._paired(report)
            await self._publish(report)
            if report.healthy:
                result.detail = f"passed: {', '.join(report.checks_run)}"
                await self._restore()
            else:
                result.result = CheckResult.FAILED
                result.detail = "; ".join(f.headline() for f in report.findings if f.unhealthy)
                result.remediation = await self._hand_to_ladder(report)
        except _Done as done:
            result.result, result.detail = done.result, done.detail
            if self._cordoned:
                await self._restore()
        finally:
            await self._release()
        metrics.active_check(node.pool, result.result.value)
        workflow.set_current_details(
            f"**{node.name}** active check: {result.result.value}\n\n{result.detail}"
        )
        return result

    # -- taking the node out and back ---------------------------------------------------------
    async def _hold_lease(self) -> None:
        inp = self._inp
        self._asked = True
        await act.REQUEST_LEASE.execute(
            LeaseWanted(
                holder=workflow.info().workflow_id,
                node=inp.node.name,
                pool=inp.node.pool,
                task_queue=workflow.info().task_queue,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"request lease (pool {inp.node.pool})",
        )
        try:
            await workflow.wait_condition(
                lambda: self._granted,
                timeout=inp.policy.lease_wait,
                timeout_summary="disruption lease for the active check",
            )
        except TimeoutError:
            raise _Done(
                CheckResult.DEFERRED, "no disruption lease: the pool's budget is in use"
            ) from None

    async def _release(self) -> None:
        """Give the lease back, or the request that still waits for one. A node the check
        leaves cordoned (handed to its ladder, or to a person) stays out: the lease becomes a
        hold, which the ladder's own lease takes over, so the pool's cap still counts it."""
        if not self._asked:
            return
        node = self._inp.node
        for_human = self._cordoned
        try:
            await LEASE_RELEASE.send_to(
                budget_workflow_id(node.pool),
                LeaseRelease(
                    holder=workflow.info().workflow_id, for_human=for_human, node=node.name
                ),
            )
        except Exception:  # noqa: BLE001 - a budget that is gone holds no lease to give back
            workflow.logger.warning("could not release the lease of %s", self._inp.node.name)
        if self._granted:
            workflow.upsert_search_attributes([LEASE.value_unset()])
        self._asked = self._granted = False

    async def _cordon(self) -> None:
        try:
            held = await act.CORDON.execute(
                self._request(Action.CORDON),
                start_to_close_timeout=CLUSTER_CALL,
                **RIDE_OUT,
                summary=f"cordon {self._inp.node.name} for its active check",
            )
        except ActivityError as err:
            if (why := other_repairer(err)) is None:
                raise
            raise _Done(CheckResult.SKIPPED, f"not checked: {why}") from None
        if held.state is not CordonState.CORDONED:
            # Someone else's cordon, a ladder's, or a dry run: not this check's node to test.
            raise _Done(CheckResult.SKIPPED, f"not checked: cordon {held.state.value}")
        self._cordoned = True
        if not self._inp.take_out:  # an idle node is looked at again once cordoned
            await self._still_idle()

    async def _still_idle(self) -> None:
        """A GPU pod scheduled between the round's look and the cordon runs on: no load test
        beside it. The node goes back; if it stays stale, a round takes it out under the budget."""
        node = self._inp.node.name
        now = await act.NODE_WORKLOADS.execute(
            NodeNames(nodes=[node]),
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"is {node} still idle, now cordoned",
        )
        if not now.nodes[node].idle:
            raise _Done(CheckResult.DEFERRED, "busy again by the cordon: a GPU pod started")

    async def _drain(self) -> None:
        try:
            await act.DRAIN.execute(
                self._request(Action.DRAIN),
                start_to_close_timeout=self._inp.policy.drain_timeout,
                retry_policy=PATIENT_RETRY,
                schedule_to_close_timeout=self._inp.policy.drain_timeout * 2,
                summary=f"drain {self._inp.node.name} for its active check",
            )
        except ActivityError as err:
            if (why := other_repairer(err)) is not None:
                raise _Done(CheckResult.SKIPPED, f"not checked: {why}") from None
            raise _Done(CheckResult.DEFERRED, f"could not drain: {cause_of(err)}") from None

    async def _restore(self) -> None:
        """Uncordon, unless the node's ladder began meanwhile (its agent reported a fault
        during the check): its cordon found this one, so the cordon is the ladder's now."""
        node = self._inp.node.name
        held = await act.NODE_WORKLOADS.execute(
            NodeNames(nodes=[node]),
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"is a ladder running on {node}",
        )
        if held.nodes[node].held_by == remediation_workflow_id(node):
            self._cordoned = False
            return
        await act.RESTORE.execute(
            self._request(Action.RESTORE),
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"uncordon {self._inp.node.name} after its active check",
        )
        self._cordoned = False

    # -- the check ------------------------------------------------------------------------------
    async def _diagnose(self) -> ProbeReport:
        """The deep diagnose on the node; one that cannot run is a failed check (fail closed)."""
        inp = self._inp
        try:
            return await act.DEEP_DIAGNOSE.execute(
                ProbeRequest(node=inp.node),
                task_queue=inp.node_task_queue,
                schedule_to_start_timeout=inp.node_pickup_timeout,
                start_to_close_timeout=inp.policy.diagnose_timeout,
                retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=5)),
                summary=f"deep diagnose {inp.node.name} (active check)",
            )
        except ActivityError as err:
            unavailable = Finding(
                node=inp.node.name,
                check=PROBE.check,
                reason=UNAVAILABLE,
                severity=Severity.CRITICAL,
                evidence=f"the active check's deep diagnose could not run: {cause_of(err)}",
                observed_at=workflow.now(),
            )
            return ProbeReport(
                node=inp.node.name,
                checks_run=[],
                findings=[unavailable],
                started_at=workflow.now(),
            )

    async def _fabric(self, report: ProbeReport) -> ProbeReport:
        """The pool's fabric tests on the node this check holds (idle or drained, cordoned):
        a failed one fails the check as a failed diagnose does."""
        found = await fabric_findings(self._inp.node.name, self._inp.policy.fabric)
        return report.model_copy(
            update={
                "findings": [*report.findings, *found],
                "checks_run": [*report.checks_run, FABRIC.check],
            }
        )

    async def _paired(self, report: ProbeReport) -> ProbeReport:
        """Tell the round this diagnose is done; a healthy node, still cordoned, waits for its
        pair tests' findings (workflows/fabric_pairs.py). No verdict in time (the round gone):
        the check stands on its own diagnose."""
        inp, parent = self._inp, workflow.info().parent
        if parent is None:
            return report
        try:
            await PAIR_READY.send_to(
                parent.workflow_id, PairReady(node=inp.node.name, healthy=report.healthy)
            )
        except Exception:  # noqa: BLE001 - a round that is gone runs no pair tests
            workflow.logger.warning("could not tell the round %s is ready", inp.node.name)
            return report
        if not report.healthy:
            return report
        try:
            await workflow.wait_condition(
                lambda: self._pairs is not None,
                timeout=inp.policy.fabric.verdict_wait(inp.policy.diagnose_timeout),
                timeout_summary="the round's pair tests",
            )
        except TimeoutError:
            workflow.logger.warning("no pair verdict for %s: not paired", inp.node.name)
            return report
        found = self._pairs.findings if self._pairs else []
        if not found:
            return report
        return report.model_copy(
            update={
                "findings": [*report.findings, *found],
                "checks_run": [c for c in report.checks_run if c != FABRIC.check] + [FABRIC.check],
            }
        )

    async def _publish(self, report: ProbeReport) -> None:
        try:
            await act.PUBLISH_ACTIVE_CHECK.execute(
                ActiveCheckPublish(node=self._inp.node, report=report),
                start_to_close_timeout=CLUSTER_CALL,
                **RIDE_OUT,
                summary=f"GpuActiveCheck of {self._inp.node.name}",
            )
        except ActivityError as err:  # the verdict still stands: the ladder, or the uncordon
            workflow.logger.warning("could not publish the active check: %s", err)

    async def _hand_to_ladder(self, report: ProbeReport) -> str:
        inp = self._inp
        try:
            started = await act.REPORT_CHECK_FAILURE.execute(
                CheckFailure(
                    node=inp.node,
                    report=report,
                    node_task_queue=inp.node_task_queue,
                    task_queue=workflow.info().task_queue,
                ),
                start_to_close_timeout=CLUSTER_CALL,
                **RIDE_OUT,
                summary=f"hand {inp.node.name}'s failed check to its ladder",
            )
        except ActivityError as err:
            if not permanent(err):
                raise
            # The node stays cordoned as remedy's: held, and visible, for a person.
            return f"no ladder started: {cause_of(err)}"
        return started.workflow_id

    def _request(self, action: Action) -> ActionRequest:
        info = workflow.info()
        return ActionRequest(
            node=self._inp.node,
            action=action,
            reason="active check",
            workflow_id=info.workflow_id,
            key=f"{info.workflow_id}/{info.first_execution_run_id}/{action.value}",
        )
