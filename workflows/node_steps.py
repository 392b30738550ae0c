"""The steps a ladder takes on its node, each an activity with its timeouts and retries: a
rung's action, the re-probe, cordon and restore (what a finished ladder leaves behind:
``workflows.ladder_records``).

Most actions are one activity, the one the action table names. A few need more around them —
the ``STEPS`` map: a reset lets the cluster's GPU pods step aside, a reboot is confirmed from
the cluster by a new boot id, a cordon rung records who holds the cordon.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ActivityCancellationType

from contract import activities as act
from contract.defs import ActivityDef
from workflows import metrics
from workflows.common import (
    PATIENT_RETRY,
    PERMANENT_ERRORS,
    RIDE_OUT,
    RIDE_OUT_DEADLINE,
    LadderStop,
    cause_of,
    node_gone,
    other_repairer,
    rung_key,
)
from workflows.mig_layout import with_mig_layout
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.core.actions import ACTIONS, Where
    from remedy.core.errors import OtherRepairer
    from remedy.core.models import (
        Action,
        ActionRequest,
        ActionResult,
        BootRequest,
        CordonResult,
        CordonState,
        Finding,
        NodeRef,
        ProbeReport,
        ProbeRequest,
        Scope,
        Severity,
    )
    from remedy.detection.probe.runner import PROBE, UNAVAILABLE
    from remedy.ladder.gpu_ladder import faulty_gpus, holds_gpus
    from remedy.ladder.remediation import (
        AttemptResult,
        Outcome,
        Phase,
        RemediationInput,
        RemediationState,
    )
    from remedy.runbook.schema import Rung

CLUSTER_CALL = timedelta(seconds=60)
PROBE_DEADLINE = timedelta(minutes=5)

Step = Callable[["NodeSteps", Rung], Awaitable[ActionResult]]
R = TypeVar("R")


def gone(node: str) -> str:
    return f"the cluster has no node {node} (deleted, or never there)"


def at_work(node: NodeRef, who: str) -> str:
    return OtherRepairer.said(node.name, who)


def stepped_back(why: str) -> LadderStop:
    """The ladder's end when another repairer is at work on its node: nothing more is done
    there, and what remedy did stays as it is (its cordon, if any: the node is faulty)."""
    return LadderStop(Outcome.OTHER_REPAIRER, f"{why}; remedy stepped back, the node as it is")


class NodeSteps:
    def __init__(
        self, inp: RemediationInput, state: RemediationState, view: RemediationView
    ) -> None:
        self._input, self._state, self._view = inp, state, view
        self._again: int | None = None  # the rung tried once more by the current act()
        self.before_cordon: Callable[[bool], Awaitable[None]] | None = None  # the breaker

    @property
    def node(self) -> NodeRef:
        return self._state.node

    def _since_detection(self) -> float:
        """Seconds from the finding that chose the runbook to now (a ladder started with no
        finding: from its start)."""
        trigger = self._state.trigger
        began = trigger.observed_at if trigger is not None else workflow.info().start_time
        began = began if began.tzinfo else began.replace(tzinfo=UTC)  # a naive time is UTC
        return (workflow.now() - began).total_seconds()

    def request(self, action: Action, reason: str = "") -> ActionRequest:
        state = self._state
        gpus = faulty_gpus(state.trigger, state.findings)
        if action is Action.DIAGNOSE:
            gpus = []  # every GPU: a slow rank or a bad GPU the findings did not name shows
        return ActionRequest(
            node=state.node,
            action=action,
            workflow_id=workflow.info().workflow_id,
            reason=reason or (state.runbook.name if state.runbook else ""),
            gpu_indices=gpus,
        )

    # -- a rung's action --------------------------------------------------------------------
    async def act(self, rung: Rung, index: int | None = None) -> ActionResult:
        """Run ``rung`` (by default the one the ladder is at; ``index``: a rung of the ladder
        tried once more, under a key of its own)."""
        self._again = index
        started, special = workflow.now(), STEPS.get(rung.action)
        try:
            result = await (special(self, rung) if special is not None else self._action(rung))
        except ActivityError as err:
            if (why := other_repairer(err)) is None:
                raise
            result = ActionResult(ok=False, other_repairer=why)
        if result.other_repairer is None:
            return result
        # Another repairer is at work on the node: the step was not taken, nor is any other.
        at = self._state.rung if index is None else index
        detail = f"not done: {result.other_repairer}"
        self._view.record(at, rung.action, started, AttemptResult.FAILED, detail, rung.scope)
        raise stepped_back(result.other_repairer)

    async def _action(self, rung: Rung, node_uid: str = "") -> ActionResult:
        """The action's own activity, with the rung's timeout, retries and scope. A disruptive
        one carries its key (this run, this rung): a retry after a lost answer finds it done
        where the effect landed (remedy/core/once.py). One that reports progress is cancelled and
        waited for (an abort): the ladder ends once it stopped, never while it evicts pods."""
        spec, state, again = ACTIONS[rung.action], self._state, self._again
        on_node = spec.where is Where.NODE
        at = state.rung if again is None else again
        key = rung_key(at, state.epoch, again is not None) if spec.disruptive else ""
        update: dict[str, object] = {"key": key, "node_uid": node_uid, "scope": rung.scope}
        if rung.scope is Scope.GPU and state.trigger is not None:  # its Xid's MIG instance
            update["gpu_instance"] = state.trigger.gpu_instance
        request = self.request(rung.action).model_copy(update=update)
        waits = spec.reports_progress
        return await act.ACTION[rung.action].execute(
            request,
            task_queue=self._input.node_task_queue if on_node else None,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            if waits
            else ActivityCancellationType.TRY_CANCEL,
            schedule_to_start_timeout=self._input.node_pickup_timeout if on_node else None,
            start_to_close_timeout=rung.timeout,
            heartbeat_timeout=min(rung.timeout, timedelta(minutes=1))
            if spec.reports_progress
            else None,
            retry_policy=RetryPolicy(
                initial_interval=rung.retry.initial_interval,
                backoff_coefficient=rung.retry.backoff,
                maximum_interval=max(rung.retry.max_interval, rung.retry.initial_interval),
                maximum_attempts=rung.retry.max_attempts,
                non_retryable_error_types=PERMANENT_ERRORS,
            ),
            summary=f"{rung.action.value} {self._state.node.name}",
        )

    async def _reset(self, rung: Rung) -> ActionResult:
        """The cluster's own GPU pods (device plugin, DCGM) hold the GPU too: stop them for
        the reset and always let them back, whatever the reset (or the release) did."""
        try:
            await self._gpu_operands(act.RELEASE_GPUS, rung.timeout)
            result = await self._action(rung)
        except (ActivityError, asyncio.CancelledError):
            await self._gpu_operands(act.RETURN_GPUS, timedelta(minutes=2))  # also when stopped
            raise
        # Not a `finally`: when a worker evicts the workflow from its cache, the coroutine is
        # closed with GeneratorExit, and an activity scheduled then (outside the workflow's
        # event loop) fails the close. The replay on the next worker gives the GPUs back.
        await self._gpu_operands(act.RETURN_GPUS, timedelta(minutes=2))
        return result

    async def _gpu_operands(
        self, step: ActivityDef[ActionRequest, ActionResult], timeout: timedelta
    ) -> ActionResult:
        return await step.execute(
            self.request(Action.RESET_GPU, step.name),
            gives_back=step is act.RETURN_GPUS,
            start_to_close_timeout=timeout,
            retry_policy=PATIENT_RETRY,
            schedule_to_close_timeout=max(RIDE_OUT_DEADLINE, 2 * timeout),
            summary=f"{step.name.replace('_', ' ')} on {self._state.node.name}",
        )

    async def _reboot(self, rung: Rung) -> ActionResult:
        """Reboot on the node, confirmed from the cluster: a new boot id and Ready again.
        The agent may go down before it answers, so a reboot activity that started and then
        timed out is not a failure on its own; one that nobody picked up is."""
        node = self._state.node
        before = await act.BOOT_ID.execute(
            BootRequest(node=node),
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"boot id of {node.name}",
        )
        if before.other_repairer is not None:  # not ours to reboot now (act() steps back)
            return ActionResult(ok=False, other_repairer=at_work(node, before.other_repairer))
        try:
            await self._action(rung)
        except ActivityError as err:
            cause = err.cause
            if not (
                isinstance(cause, ActivityTimeout)
                and cause.type is not TimeoutType.SCHEDULE_TO_START
            ):
                raise
        return await act.CONFIRM_REBOOT.execute(
            BootRequest(node=node, previous_boot_id=before.boot_id),
            start_to_close_timeout=rung.timeout,
            heartbeat_timeout=timedelta(minutes=1),
            retry_policy=PATIENT_RETRY,  # the rung's timeout is the deadline, not one attempt
            schedule_to_close_timeout=rung.timeout,
            summary=f"wait for {node.name} to come back",
        )

    async def _replace(self, rung: Rung) -> ActionResult:
        """A replacement is for the node object the ladder sees now (its uid): a retry after
        the answer was lost finds that object gone, or another under the name, and stops."""
        node = self._state.node
        seen = await act.BOOT_ID.execute(
            BootRequest(node=node),
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"which node object {node.name} is",
        )
        if seen.other_repairer is not None:  # not ours to replace now (act() steps back)
            return ActionResult(ok=False, other_repairer=at_work(node, seen.other_repairer))
        return await self._action(rung, node_uid=seen.uid)

    async def _cordon_rung(self, rung: Rung) -> ActionResult:
        await self.cordon(self._state.runbook.name if self._state.runbook else "a rung")
        held = self._state.cordon
        return ActionResult(ok=held is not None, detail=held.value if held else "cordon failed")

    # -- around the rungs -------------------------------------------------------------------
    async def probe(self) -> ProbeReport:
        """Re-probe on the node. A probe that cannot run is an unhealthy report (fail closed)."""
        state = self._state
        try:
            report = await act.PROBE.execute(
                ProbeRequest(node=state.node),
                task_queue=self._input.node_task_queue,
                schedule_to_start_timeout=self._input.node_pickup_timeout,
                start_to_close_timeout=CLUSTER_CALL,
                retry_policy=PATIENT_RETRY,  # a dead agent: schedule-to-start, never retried
                schedule_to_close_timeout=PROBE_DEADLINE,
                summary=f"probe {state.node.name}",
            )
        except ActivityError as err:
            unavailable = Finding(
                node=state.node.name,
                check=PROBE.check,
                reason=UNAVAILABLE,
                severity=Severity.CRITICAL,
                evidence=cause_of(err),
                observed_at=workflow.now(),
            )
            report = ProbeReport(
                node=state.node.name,
                checks_run=[],
                findings=[unavailable],
                started_at=workflow.now(),
            )
        state.last_probe = report
        return report

    async def cordon(
        self, reason: str, recheck: bool = True, breakers: list[str] | None = None
    ) -> bool:
        """``breakers``: a cordon sent before any leave, which reads those pools' published
        breakers first, inside the workflow task (a local activity); False when one held it
        (nothing done, nothing recorded). Else the breaker's leave comes first
        (quarantine_gate)."""
        if breakers is None and self.before_cordon is not None:
            await self.before_cordon(recheck)
        refused = False

        def held(result: CordonResult) -> str | None:
            nonlocal refused
            if result.state is CordonState.HELD_BY_BREAKER:
                refused = True
                return None
            self._state.cordon = result.state
            if result.state is CordonState.CORDONED:
                metrics.node_cordoned(self._state.node.pool, self._since_detection())
            return result.state.value

        self._state.cordon_asked = True
        request = self.request(Action.CORDON, reason)
        request = request.model_copy(update={"breakers": breakers or []})
        local = breakers is not None
        await self._outside_ladder(act.CORDON, Action.CORDON, request, held, local)
        return not refused

    async def hold_cordoned(self) -> None:
        """A node nobody could fix must not take work, whether or not the runbook cordoned."""
        if self._state.cordon is None:
            try:
                await self.cordon("needs a human", recheck=False)
            except LadderStop as stop:  # another repairer's node now: theirs to hold
                if stop.outcome is not Outcome.OTHER_REPAIRER:
                    raise

    async def restore(self) -> None:
        state = self._state
        # A cordon sent whose answer never came (cancelled by an abort or clear, or past its
        # deadline) may have landed: the restore undoes only remedy's own cordon, so ask it.
        unanswered = state.cordon is None and state.cordon_asked
        if not (state.cordoned_by_remedy or unanswered):
            if not holds_gpus(state.runbook, state.attempts):  # a GPU quarantine to lift
                return  # never undo a cordon someone else set
        self._view.enter(Phase.RESTORING)
        # A failure leaves the node cordoned and annotated as remedy's: owned, and visible.
        restore = self.request(Action.RESTORE, "recovered")
        await self._outside_ladder(act.RESTORE, Action.RESTORE, restore, lambda r: r.detail)

    async def _outside_ladder(
        self,
        step: ActivityDef[ActionRequest, R],
        action: Action,
        request: ActionRequest,
        done: Callable[[R], str | None],
        local: bool = False,
    ) -> None:
        """Cordon and restore: recorded as attempts outside the ladder (rung -1); a failure is
        recorded, not raised (``done`` takes the answer and says what happened; None: nothing
        happened, nothing recorded), but for a node the cluster does not have: the ladder ends
        (``node_gone``). ``local``: inside the workflow task."""
        started = workflow.now()
        try:
            result = await step.execute(
                request,
                gives_back=action is Action.RESTORE,
                local=local,
                start_to_close_timeout=CLUSTER_CALL,
                **RIDE_OUT,
                summary=f"{action.value} {self._state.node.name}",
            )
        except ActivityError as err:
            self._view.record(-1, action, started, AttemptResult.FAILED, cause_of(err))
            if node_gone(err) and action is Action.CORDON:
                raise LadderStop(Outcome.NODE_GONE, gone(self._state.node.name)) from None
            if (why := other_repairer(err)) is not None and action is Action.CORDON:
                raise stepped_back(why) from None
            return
        if (detail := done(result)) is not None:
            self._view.record(-1, action, started, AttemptResult.DONE, detail)


# The actions that need more than their own activity.
STEPS: dict[Action, Step] = {
    Action.REBOOT: with_mig_layout(NodeSteps._reboot),
    Action.RESET_GPU: with_mig_layout(NodeSteps._reset),
    Action.CORDON: NodeSteps._cordon_rung,
    Action.REPLACE: NodeSteps._replace,
}
