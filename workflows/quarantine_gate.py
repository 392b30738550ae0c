"""A ladder's side of the quarantine breaker (remedy.disruption.quarantine): as it begins, it
cordons at
once where the budgets' published breakers are closed, and reports its node to its pool's
budget (and the cluster's) right after (``cordon_first``); where one holds new cordons it asks
leave to cordon, and every cordon it makes waits for that leave. While a breaker is tripped
the ladder waits in ``held_by_breaker``, and says so; an abort ends the wait like any other. A
clean re-probe while it waits ends the ladder ``cleared`` (the storm subsides node by node);
it re-probes on its runbook's clock (``remedy.disruption.quarantine.reprobe_every``: a thermal
transient
held by the breaker ends at its next recheck, not 5 minutes later), and asks again every
``ASK_AGAIN_EVERY``, in case the budget started afresh and forgot the ask. An ask that cannot
be delivered is given up: the ladder cordons as ladders did before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract.activities import ASK_TO_CORDON
from contract.messages import CORDON_LEAVE, LEASE_RELEASE
from contract.patches import REPROBE_SEES_THE_FAULT, patched
from contract.unreadable import Unreadable
from workflows.common import RIDE_OUT, LadderStop
from workflows.disruption_lease import unhealthy
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from contract.names import budget_workflow_id
    from remedy.core.models import ProbeReport
    from remedy.disruption.budget import CLUSTER_POOL, LeaseRelease
    from remedy.disruption.budget_messages import ASK_AGAIN_EVERY
    from remedy.disruption.quarantine import CordonAsked, CordonLeave, reprobe_every
    from remedy.ladder.remediation import Outcome, Phase, RemediationState
    from remedy.ladder.verification import VerifyBy, verify_by

ASK_CALL = timedelta(seconds=30)


# NodeSteps.cordon: (reason, recheck, breakers read first) → whether it was not held.
Cordon = Callable[[str, bool, list[str] | None], Awaitable[bool]]


class QuarantineGate:
    def __init__(
        self,
        state: RemediationState,
        view: RemediationView,
        probe: Callable[[], Awaitable[ProbeReport]],
    ) -> None:
        self._state, self._view, self._probe = state, view, probe
        self._only_what_it_sees = False  # decide(): the patch, asked at the run's start

    def decide(self) -> None:
        """Ask the patch at the run's start (before any local activity, as operator_keys'):
        before it, a clean re-probe ended a held ladder whatever its fault was."""
        self._only_what_it_sees = patched(REPROBE_SEES_THE_FAULT)

    def _reprobe_sees(self) -> bool:
        """A re-probe can tell the fault is gone. A fault only the deep diagnose shows (a slow
        or failing GPU under load) is invisible to it: a clean probe of such a node is not a
        recovery, and the breaker's hold goes on. (An Xid's ladder still ends on a clean probe,
        as before: the Xid again is a new report, and a new ladder.)"""
        trigger = self._state.trigger
        if not self._only_what_it_sees or trigger is None:
            return True
        return verify_by(trigger) is not VerifyBy.DIAGNOSE

    async def cordon_first(self, cordon: Cordon, reason: str, at: datetime) -> None:
        """The ladder's first cordon, before anything that can wait: it reads the published
        breakers of the node's pool and the cluster, and goes at once where they are closed;
        the report follows it. Held (one tripped, or one node from tripping): the ladder asks
        leave, and cordons once given it, as every ladder did before."""
        state = self._state
        if await cordon(reason, True, [state.node.pool, CLUSTER_POOL]):
            await self.ask(at, leave=False)
            return
        await self.ask(at)
        await cordon(reason, True, None)

    async def ask(self, at: datetime, leave: bool = True) -> None:
        """The ladder began at ``at``: the report that also asks leave to cordon (``leave``;
        else the report alone, of a ladder that cordoned without asking)."""
        state = self._state
        holder = workflow.info().workflow_id if leave else ""
        if leave and not state.cordon_token:
            state.cordon_token = str(workflow.uuid4())  # the leave carries it back
        try:
            asked = await ASK_TO_CORDON.execute(
                unhealthy(state, at, holder=holder, token=state.cordon_token if leave else ""),
                local=not leave,  # right after the first cordon
                start_to_close_timeout=ASK_CALL,
                **RIDE_OUT,
                summary=f"report unhealthy{', ask leave to cordon' if leave else ''} "
                f"(pool {state.node.pool})",
            )
        except ActivityError as err:
            workflow.logger.warning("%s: no leave asked: %s", state.node.name, err)
            asked = CordonAsked()
        if not leave:
            return  # nothing to wait for: its later cordons go at once, as before the breaker
        if state.cordon_asked_of is None:  # asked again: the same budgets answer
            state.cordon_asked_of = asked.budgets

    def cleared(self) -> bool:
        asked = self._state.cordon_asked_of
        return asked is None or set(asked) <= set(self._state.cordon_leave)

    async def before_cordon(self, recheck: bool = True) -> None:
        """Wait for leave to cordon from every budget asked. ``recheck``: a clean re-probe
        meanwhile ends the ladder (not for the cordon of a node left for a person)."""
        if self.cleared():
            return
        state = self._state
        was = state.phase
        self._view.enter(Phase.HELD_BY_BREAKER)
        own = recheck  # on the runbook's clock; a node left for a person: ASK_AGAIN_EVERY
        every = reprobe_every(state.runbook) if own else ASK_AGAIN_EVERY
        asked = workflow.now()
        while not self.cleared():
            try:
                await workflow.wait_condition(
                    self.cleared,
                    timeout=every,
                    timeout_summary="leave to cordon (the quarantine breaker is tripped)",
                )
            except TimeoutError:
                if recheck and self._reprobe_sees() and (await self._probe()).healthy:
                    raise LadderStop(
                        Outcome.CLEARED, "clean re-probe while the breaker held the cordon"
                    ) from None
                if not own or workflow.now() - asked >= ASK_AGAIN_EVERY:
                    await self.ask(state.started_at or workflow.now())
                    asked = workflow.now()
        self._view.enter(was)

    async def withdraw(self) -> None:
        """The ladder ends: the budgets that have not given leave stop counting its node (a
        ladder from before never asked, and sends nothing)."""
        state = self._state
        holder = workflow.info().workflow_id
        for pool in state.cordon_asked_of or []:
            if pool in state.cordon_leave:
                continue
            try:
                await LEASE_RELEASE.send_to(
                    budget_workflow_id(pool), LeaseRelease(holder=holder, node=state.node.name)
                )
            except Exception:  # noqa: BLE001 - a budget that is gone counts nothing
                workflow.logger.warning("%s: ask not withdrawn from %s", state.node.name, pool)


class QuarantineMessages:
    """Mixed into NodeRemediation: the budgets' leave to cordon."""

    _state: RemediationState
    _view: RemediationView

    @CORDON_LEAVE.guarded(max_bytes=4096)
    def cordon_leave(self, leave: CordonLeave | Unreadable) -> None:
        token = self._state.cordon_token
        if isinstance(leave, Unreadable):
            if token:  # a ladder that keeps its door: said and counted
                self._view.refused("cordon_leave", leave.why)
            return
        if token and leave.token != token:
            said = "no token" if not leave.token else "another ask's token"
            self._view.refused("cordon_leave", f"leave from pool {leave.pool} with {said}")
            return
        if leave.pool not in self._state.cordon_leave:
            self._state.cordon_leave = [*self._state.cordon_leave, leave.pool]
        self._view.publish()
