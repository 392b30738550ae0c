"""DisruptionBudget: one workflow per node pool that hands out disruption leases.

Every disruptive rung (drain, kill job, reset, reboot, replace) holds a lease. At most the
budget's share of the pool holds one at a time; waiters are served first come, first served; a
holder whose workflow closed without releasing (terminated, timed out) is reclaimed. Signals are
handled one at a time by the workflow, so grants cannot race; one workflow task takes every
request that came meanwhile and sends all it grants together, without waiting for their
delivery (workflows/budget_outbox.py), by one activity that signals the holders side by side
(remedy.disruption.budget_signals) rather than one server-side signal each, which the server
delivers one
after another. A ladder asks by the update
``ask_lease`` where it can: one the loop grants at once is told in the answer, not by a signal
(workflows/disruption_lease.py). The breaker (remedy.disruption.quarantine)
stops granting while too much of the pool is unhealthy within the window, and holds the cordons
of the ladders that ask for leave until it closes: by itself once the storm subsides (letting
them go slowly, remedy.disruption.slow_start), or by `remedy resume-pool`. The cluster's budget
(``CLUSTER_POOL``) is one more breaker over every pool, with no leases.
"""

from __future__ import annotations

from temporalio import workflow

from contract import search_attributes
from contract.messages import (
    ASK_LEASE,
    BUDGET_STATE,
    CLOSE_BREAKER,
    HOLDER_WAITS,
    LEASE_RELEASE,
    LEASE_REQUEST,
    NODE_UNHEALTHY,
    NODES_UNHEALTHY,
    RELEASE_HOLD,
    RESUME_POOL,
)
from workflows import metrics
from workflows.breaker_board import BreakerBoard
from workflows.budget_breaker import BudgetBreaker
from workflows.budget_outbox import Outbox
from workflows.budget_rebuild import rebuild
from workflows.budget_renewal import Renewal
from workflows.budget_sweep import Alarm, BudgetSweep
from workflows.operator_updates import acted

with workflow.unsafe.imports_passed_through():
    from contract.names import DISRUPTION_BUDGET_WORKFLOW
    from remedy.disruption import held_by_people, slow_start
    from remedy.disruption.budget import BudgetState, LeaseRelease, LeaseRequest, UnhealthyReport
    from remedy.disruption.budget_gpus import covered, grant_waiting, granted_scope
    from remedy.disruption.budget_messages import (
        HELD_FOR_HUMAN,
        CordonAsk,
        HoldReleased,
        HumanWait,
        ResumeRequest,
        ResumeResult,
    )
    from remedy.disruption.budget_signals import LeaseAnswer, ReportsTaken, UnhealthyReports
    from remedy.disruption.budget_view import budget_details
    from remedy.disruption.quarantine import (
        Alert,
        accept_what_is_out,
        forget_recovered,
    )

SWEEP = "reclaim dead holders, give back restored nodes, age out asks and unhealthy reports"


@workflow.defn(name=DISRUPTION_BUDGET_WORKFLOW)
class DisruptionBudget(BudgetSweep, BudgetBreaker):
    @workflow.init
    def __init__(self, state: BudgetState) -> None:
        self._state = state
        self._changed = True
        self._regrant: list[LeaseRequest] = []
        self._leave: list[CordonAsk] = []  # asks to tell they may cordon (a resume)
        self._alert: Alert | None = None  # the breaker tripped or closed: an Event to record
        self._alarm, self._swept_at = Alarm(), workflow.now()
        self._outbox = Outbox()  # grants and leave, sent without the loop waiting (outbox)
        self._board = BreakerBoard()  # the breaker where cordons read it (breaker_board)
        self._answering: set[str] = set()  # holders whose update answers their grant
        self._by_signal: set[str] = set()  # holders that asked by signal too (budget_outbox)
        self._closing = False  # about to continue as new: what waits is decided by the next run
        self._renewal = Renewal()  # when it continues as new (budget_renewal)

    # -- messages --------------------------------------------------------------------------
    @LEASE_REQUEST.handler
    def request(self, req: LeaseRequest) -> None:
        self._by_signal.add(req.holder)  # an update of its in flight may be read by nobody
        self._line_up(req)

    def _line_up(self, req: LeaseRequest) -> None:
        state = self._state
        state.pool_size, state.pool_gpus, state.policy = req.pool_size, req.pool_gpus, req.policy
        slow_start.proven(state, req.holder)  # an admitted cordon's ladder: its fault is real
        capped = bool(state.held)
        if state.take_over_hold(req, workflow.now(), within_cap=capped):
            self._regrant.append(req)  # its node was held for a human: it is out already
        elif covered(
            state, req
        ):  # a GPU lease asking for its node waits (remedy.disruption.budget_gpus)
            # The holder asks again: a new run for the same node (the last one was terminated
            # before it released) or a retried request. The node still holds its one lease;
            # tell the run that asks, or it would wait for a grant that went to the old run.
            self._regrant.append(req)
        elif all(w.holder != req.holder for w in state.waiting):
            state.waiting.append(req)
        else:  # asked again (a new run, say): in its place, and the grant names the newest run
            state.waiting = [
                w.model_copy(update={"run": req.run, "token": req.token})
                if w.holder == req.holder
                else w
                for w in state.waiting
            ]
        self._changed = True

    @ASK_LEASE.handler
    async def ask_lease(self, req: LeaseRequest) -> LeaseAnswer:
        """The request, answered once the loop has decided it: granted (then no signal tells
        it), or not yet (the grant, when it comes, is signalled as for ``request``). No timer:
        the loop's next turn decides it, or the next run if this one is continuing as new."""
        self._answering.add(req.holder)
        try:
            self._line_up(req)
            await workflow.wait_condition(lambda: not self._changed or self._closing)
        finally:
            self._answering.discard(req.holder)
        state = self._state
        if not covered(state, req):
            return LeaseAnswer()
        return LeaseAnswer(granted=True, scope=granted_scope(state, req.holder))

    @ASK_LEASE.validator(ask_lease)
    def why_not_ask(self, req: LeaseRequest) -> str:
        """Refused, the asker signals instead (nothing reaches the history)."""
        if self._closing:
            return "the budget is continuing as new: ask by signal"
        if req.pool != self._state.pool:
            return f"this is the budget of pool {self._state.pool}, not {req.pool}"
        return ""

    @LEASE_RELEASE.handler
    def release(self, req: LeaseRelease) -> None:
        state = self._state
        if not (req.for_human or req.still_out):
            forget_recovered(state, req.holder, req.node)  # back in service, or gone
        slow_start.gone(state, req.holder)
        if req.for_human:
            state.hand_to_human(req.holder, workflow.now(), req.node)
        elif req.still_out:
            state.keep_out(req.holder, workflow.now(), req.node)
        state.holders = [h for h in state.holders if h.holder != req.holder]
        state.waiting = [w for w in state.waiting if w.holder != req.holder]
        state.held = [h for h in state.held if h.holder != req.holder]  # an operator's release
        state.asking = [a for a in state.asking if a.holder != req.holder]
        self._by_signal.discard(req.holder)
        # The node's own ladder asked while an active check held it: it must not wait on the
        # node's own hold (that ends only when the ladder gives the node back).
        for waiting in state.waiting_on_held():
            if state.take_over_hold(waiting, workflow.now(), within_cap=True):
                self._regrant.append(waiting)
        self._changed = True

    @RELEASE_HOLD.handler
    async def release_hold(self, req: LeaseRelease) -> HoldReleased:
        """An operator's release of a node held for a person, answered once the loop granted
        what waited for the share it frees."""
        self.release(req)
        await acted(lambda: not self._changed, "the pool grants what waited")
        state = self._state
        return HoldReleased(
            pool=state.pool,
            node=req.holder.removeprefix(HELD_FOR_HUMAN),
            held=[h.node for h in state.held],
            holders=len(state.holders),
            waiting=len(state.waiting),
        )

    @RELEASE_HOLD.validator(release_hold)
    def why_not_release_hold(self, req: LeaseRelease) -> str:
        return self._state.why_not_release(req.holder)

    @NODE_UNHEALTHY.handler
    def node_unhealthy(self, report: UnhealthyReport) -> None:
        state = self._state
        state.pool_size, state.policy = report.pool_size, report.policy
        state.unhealthy[report.node] = report.at
        state.unhealthy_pools[report.node] = report.pool
        if report.holder:  # it asks leave to cordon: given by the loop, once the breaker lets it
            state.ask(report, workflow.now())
        self._changed = True

    @NODES_UNHEALTHY.handler
    async def nodes_unhealthy(self, batch: UnhealthyReports) -> ReportsTaken:
        """A storm's reports together (activities/group_commit.py), each as its signal's."""
        for report in batch.reports:
            self.node_unhealthy(report)
        return ReportsTaken(reports=len(batch.reports))

    @NODES_UNHEALTHY.validator(nodes_unhealthy)
    def why_not_reports(self, batch: UnhealthyReports) -> str:
        return "" if batch.reports else "no reports: nothing to count"

    @HOLDER_WAITS.handler
    def holder_waits(self, wait: HumanWait) -> None:
        """A lease holder's ladder waits for a person, or no longer: said in the details,
        `remedy status` and the metrics (the grants do not change)."""
        self._state.note_human_wait(wait)
        self._changed = True

    @RESUME_POOL.handler  # the signal: clients of the release before
    def resume(self, req: ResumeRequest) -> None:
        state = self._state
        state.tripped, state.unhealthy = False, {}
        state.breaker_note = f"resumed by {req.who} at {workflow.now().isoformat()}"
        accept_what_is_out(state)
        slow_start.end(state)  # the operator's word: every held cordon goes
        self._leave, state.asking = [*self._leave, *state.asking], []  # they cordon now
        self._changed = True

    @CLOSE_BREAKER.handler
    async def close_breaker(self, req: ResumeRequest) -> ResumeResult:
        """The same, answered once the loop granted what waited (the leases after)."""
        self.resume(req)
        await acted(lambda: not self._changed, "the pool grants what waited")
        state = self._state
        return ResumeResult(
            pool=state.pool,
            note=state.breaker_note,
            holders=len(state.holders),
            waiting=len(state.waiting),
        )

    @CLOSE_BREAKER.validator(close_breaker)
    def why_not_resume(self, req: ResumeRequest) -> str:
        if self._state.tripped:
            return ""
        return "the storm breaker is not tripped: nothing to resume"

    @BUDGET_STATE.handler
    def state(self) -> BudgetState:
        return self._state

    # -- the loop --------------------------------------------------------------------------
    @workflow.run
    async def run(self, state: BudgetState) -> None:
        # `RemedyPool = '...'` finds it too
        workflow.upsert_search_attributes([search_attributes.POOL.value_set(state.pool)])
        if not state.rebuilt:
            await rebuild(self._state)  # who holds a share already (budget_rebuild)
            self._changed = True
        while True:
            # the sweep on its own clock (budget_sweep), not put off by signals
            if not (self._state.holders or self._state.held):
                self._swept_at = workflow.now()  # nothing to sweep until someone holds
            self._alarm.set(self._wake_at(), SWEEP)
            await workflow.wait_condition(
                lambda: self._changed or self._alarm.due() or self._renewal.due()
            )
            if self._alarm.ring():
                await self._housekeep(self._sweep)  # budget_sweep: less often when quiet
            messages, self._changed = self._changed, False
            self._check_breaker()
            await self._grant()
            await self._board.publish(self._state)  # after the grants (an update waits on them)
            if self._state.asking or self._leave:
                await self._quarantine()
            self._publish()
            if self._regrant:
                regrant, self._regrant = self._regrant, []
                await self._send_out(grants=regrant)
            if self._renewal.now(messages or self._changed):
                self._closing = True  # an ask that comes now is answered "not yet"
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() and self._outbox.idle()
                )
                workflow.continue_as_new(self._state)

    async def _sweep(self) -> None:
        if self._state.holders:
            await self._reclaim()
        if self._state.held:
            await self._end_holds()
        self._swept_at = workflow.now()

    def _publish(self) -> None:
        """The details and the metrics, after the grants: what the pool is now."""
        state = self._state
        state.forget_gone_waits()
        workflow.set_current_details(budget_details(state))
        metrics.pool_budget(
            state.pool, state.tripped, len(state.holders), len(state.waiting), len(state.asking)
        )
        metrics.held_by_people(
            state.pool, len(held_by_people.held_by_people(state)), held_by_people.seized(state)
        )

    async def _grant(self) -> None:
        state = self._state
        if state.held:
            for waiting in state.waiting_on_held():  # a lease freed (reclaimed, say): first
                if state.take_over_hold(waiting, workflow.now(), within_cap=True):
                    self._regrant.append(waiting)
        granted = grant_waiting(state, workflow.now())  # in nodes and GPUs (budget_gpus)
        # Every grant in one workflow task: a burst of 1,000 requests is served in a few
        # round trips, not one per node.
        await self._send_out(grants=granted)
