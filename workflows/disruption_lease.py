"""A ladder's side of its pool's DisruptionBudget: report the node unhealthy (the storm breaker
counts it), hold a lease before the first disruptive rung, give it back at the end.

A workflow can signal another but not start it, so the first two go through activities
(signal-with-start of the budget). The request and the release are local activities of the
ladder's workflow task, so a lease costs the ladder no activity task for the request and no
workflow task more for the release. A lease the budget can grant at once is the request's
answer (the budget's update ``ask_lease``, activities/budget.py): no grant signal, no workflow
task for it, no re-ask timer; one it cannot grant yet still comes by signal."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract.activities import RELEASE_LEASE, REPORT_UNHEALTHY, REQUEST_LEASE
from contract.messages import HOLDER_WAITS
from workflows.common import RIDE_OUT, Interrupted, permanent
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from contract.names import budget_workflow_id
    from remedy.core.models import Action, Scope
    from remedy.disruption.budget import LeaseGrant, LeaseRelease, LeaseWanted, NodeUnhealthy
    from remedy.disruption.budget_messages import HumanWait
    from remedy.disruption.budget_signals import LeaseAnswer
    from remedy.ladder.remediation import AttemptResult, Outcome, Phase, RemediationState

BUDGET_CALL = timedelta(seconds=30)
REASK_EVERY = timedelta(minutes=5)
REASK_AFTER_REFUSAL = timedelta(minutes=1)  # refused grants make it ask at most this often
# Endings that leave the node as it is: cordoned by remedy, drained, for a person.
LEFT_AS_IT_IS = (Outcome.NEEDS_HUMAN, Outcome.ABORTED)


class DisruptionLease:
    def __init__(self, state: RemediationState, view: RemediationView) -> None:
        self._state, self._view = state, view
        # A grant without this request's token came while it waited: a budget that started
        # afresh knows the ladder but not its token, and a re-ask tells it (at most once a
        # minute: grants sent by hand must not make it ask without end).
        self._ask_again = False
        self._reasked_at: datetime | None = None  # when a refused grant last made it ask

    async def report_unhealthy(self, at: datetime) -> None:
        """The ladder began at ``at``. Bookkeeping for the storm breaker: a report that cannot
        get through before its deadline is given up, and the ladder goes on."""
        state = self._state
        try:
            await REPORT_UNHEALTHY.execute(
                unhealthy(state, at),
                start_to_close_timeout=BUDGET_CALL,
                **RIDE_OUT,
                summary=f"report unhealthy (pool {state.node.pool})",
            )
        except ActivityError as err:
            workflow.logger.warning("%s: unhealthy report not delivered: %s", state.node.name, err)

    async def hold(
        self,
        interrupted: Callable[[], bool] = lambda: False,
        scope: Scope = Scope.NODE,
        gpus: list[int] | None = None,
    ) -> None:
        """Wait for the pool's budget to grant this node a lease (kept until the remediation
        ends; the `lease_granted` signal sets ``lease_granted_at``). While the storm breaker
        is tripped, the wait goes on; it ends with ``Interrupted`` once ``interrupted()`` (a
        worse fault came: the ladder switches runbooks first). ``scope`` GPU: a GPU-scoped
        rung's lease, for ``gpus`` only; a node rung after one asks for the node, keeping
        its GPU lease until the budget widens it (remedy/disruption/budget_gpus.py)."""
        state = self._state
        if self._holds(scope):
            return
        if scope is Scope.GPU and not gpus:
            scope = Scope.NODE  # which GPU is not known: the node
        self._view.enter(Phase.AWAITING_LEASE)  # while it asks, too: an outage may be long
        if state.lease_requested_at is None or state.lease_granted_at is not None:
            state.lease_requested_at = state.lease_requested_at or workflow.now()
            # a new request: its own token (a re-ask keeps it)
            state.lease_token = str(workflow.uuid4())
            await self._ask(scope, gpus or [])  # first, or the node after a GPU lease
        while not self._holds(scope):
            if interrupted():
                raise Interrupted("a worse fault came while waiting for the lease")
            try:
                await workflow.wait_condition(
                    lambda: self._holds(scope) or interrupted() or self._ask_again,
                    timeout=REASK_EVERY,
                    timeout_summary=f"disruption lease (asked again every {REASK_EVERY})",
                )
            except TimeoutError:
                # The budget may have been restarted and forgotten this ladder: ask again
                # (a budget that has it waiting, or holding, does not count it twice).
                await self._ask(scope, gpus or [])
                continue
            if self._ask_again and not self._holds(scope):
                self._ask_again = False
                await self._ask(scope, gpus or [])

    def _holds(self, scope: Scope) -> bool:
        """A lease as wide as ``scope``: a node lease covers a GPU-scoped rung."""
        state = self._state
        granted = state.lease_granted_at is not None
        return granted and (scope is Scope.GPU or state.lease_scope is Scope.NODE)

    def granted(self, grant: LeaseGrant) -> None:
        """The budget's grant (again: a re-grant, or the node after a GPU lease): a lease only
        widens. One that names a run is this ladder's if this run asked, or the run it
        continued from: an earlier ladder's is ignored (this one asks for its own), and one
        for this run that finds no request on record answers a request whose record was lost
        with a workflow task that timed out: asked, then, so that it is given back."""
        state = self._state
        run = workflow.info().run_id
        if state.lease_token:
            if grant.token != state.lease_token:
                said = "no token" if not grant.token else "another request's token"
                self._view.refused(
                    "lease_granted", f"a grant for pool {grant.pool} with {said}: not this ladder's"
                )
                last, now = self._reasked_at, workflow.now()
                if state.lease_granted_at is None and (
                    last is None or now - last >= REASK_AFTER_REFUSAL
                ):
                    self._ask_again, self._reasked_at = True, now
                return
        elif grant.run and grant.run not in (run, state.lease_asked_in):
            workflow.logger.info("%s: a grant for run %s ignored", state.node.name, grant.run)
            return
        elif grant.run == run and state.lease_requested_at is None:
            state.lease_requested_at = workflow.now()
            state.lease_asked_in = run
        if state.lease_granted_at is None or grant.scope is Scope.NODE:
            state.lease_scope = grant.scope
        state.lease_granted_at = state.lease_granted_at or workflow.now()
        self._view.publish()  # 'held': what a rebuilt budget counts

    async def _ask(self, scope: Scope = Scope.NODE, gpus: list[int] | None = None) -> None:
        """A request that cannot get through before its deadline (an outage) is given up: the
        wait goes on and the ladder asks again. One refused for good (a permission the
        controller lacks) ends the ladder: asking again cannot help."""
        state = self._state
        wanted = LeaseWanted(
            holder=workflow.info().workflow_id,
            node=state.node.name,
            pool=state.node.pool,
            task_queue=workflow.info().task_queue,
            cordoned=state.cordoned_by_remedy,
            scope=scope,
            gpus=gpus or [],
            answer=True,
            run=workflow.info().run_id,
            token=state.lease_token,
        )
        state.lease_asked_in = wanted.run
        try:
            told: LeaseAnswer | None = await REQUEST_LEASE.execute(
                wanted,
                start_to_close_timeout=BUDGET_CALL,
                **RIDE_OUT,
                summary=f"request lease (pool {state.node.pool})",
                local=True,
            )
        except ActivityError as err:
            if permanent(err):
                raise
            workflow.logger.warning("%s: lease request not delivered: %s", state.node.name, err)
            return
        if told is not None and told.granted:
            self.granted(
                LeaseGrant(pool=state.node.pool, scope=told.scope, token=state.lease_token)
            )

    async def waits_for_person(self, what: str, since: datetime | None) -> bool:
        """Tell the pool's budget that this ladder, holding a lease, waits for a person
        (``since``), or no longer (None): the budget's details, `remedy status` and a metric
        then say the pool is held by people. A ladder with no lease holds no one up: nothing
        is said. Returns whether it told (then it must tell the end too)."""
        state = self._state
        holds = state.lease_granted_at is not None and state.lease_released_at is None
        if not holds:
            return False
        node = state.node
        wait = HumanWait(holder=workflow.info().workflow_id, node=node.name, what=what, since=since)
        try:
            await HOLDER_WAITS.send_to(budget_workflow_id(node.pool), wait)
        except Exception:  # noqa: BLE001 - a budget that is gone holds no lease to wait on
            workflow.logger.warning("could not tell the budget that %s waits", node.name)
        return True

    async def release(self, outcome: Outcome) -> None:
        """Give the lease back at the end; a node left cordoned for a person keeps counting
        (the budget turns the lease into a hold that ends when remedy's cordon goes), even
        when no lease was ever asked for (an approval that timed out after the cordon) — but
        for one whose share an unanswered approval gave back (``on_approval_timeout:
        release``): the budget keeps it out of the count."""
        state = self._state
        if state.lease_released_at is not None:
            return
        left = outcome in LEFT_AS_IT_IS and state.cordoned_by_remedy and not _restored(state)
        still_out = left and state.share_given_back
        if state.lease_requested_at is None:
            if left:
                await self._send(for_human=not still_out, still_out=still_out)
            return
        for_human = left and not still_out
        released = workflow.now()  # when it let go: the budget may grant before the send returns
        await self._send(for_human, still_out)
        state.lease_released_at = released
        self._view.publish()  # RemedyLease no longer 'held': a rebuilt budget must not count it

    async def _send(self, for_human: bool, still_out: bool = False) -> None:
        node = self._state.node
        release = LeaseRelease(
            holder=workflow.info().workflow_id,
            for_human=for_human,
            node=node.name,
            still_out=still_out,
            pool=node.pool,
        )
        try:  # a budget that is gone is no failure (activities.budget)
            await RELEASE_LEASE.execute(
                release,
                start_to_close_timeout=BUDGET_CALL,
                **RIDE_OUT,
                summary=f"release lease (pool {node.pool})",
                local=True,
                gives_back=True,  # a stopped ladder still gives its share back
            )
        except ActivityError as err:  # given up: the budget's sweep reclaims it
            workflow.logger.warning("could not release the lease of %s: %s", node.name, err)


def unhealthy(
    state: RemediationState, at: datetime, holder: str = "", token: str = ""
) -> NodeUnhealthy:
    """The ladder's report to its pool's budget (``holder``: it asks leave to cordon too, and
    ``token`` is what its leave must carry back)."""
    return NodeUnhealthy(
        node=state.node.name,
        pool=state.node.pool,
        task_queue=workflow.info().task_queue,
        at=at,
        holder=holder,
        token=token,
    )


def _restored(state: RemediationState) -> bool:
    """Its last step gave the node back (an abort with --restore)."""
    last = state.attempts[-1] if state.attempts else None
    return last is not None and last.action is Action.RESTORE and last.result is AttemptResult.DONE
