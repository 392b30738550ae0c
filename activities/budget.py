"""Talking to a pool's DisruptionBudget from a NodeRemediation: a workflow can signal another
workflow but not start one, so lease requests and unhealthy reports go through signal-with-start
here. Also: which lease holders have closed (for reclaiming their leases), and which running
ladders hold one (for a budget run that starts afresh)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.empty_pb2 import Empty
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.errors import temporal_errors
from activities.group_commit import GroupCommit
from activities.starts import described
from contract import activities as act
from contract.defs import URGENT, UpdateRejected, UpdateUnknown
from contract.messages import (
    ASK_LEASE,
    LEASE_RELEASE,
    LEASE_REQUEST,
    NODE_UNHEALTHY,
    NODES_UNHEALTHY,
)
from contract.names import (
    ACTIVE_CHECK_WORKFLOW,
    DISRUPTION_BUDGET_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
    budget_task_queue,
    budget_workflow_id,
    remediation_workflow_id,
)
from contract.search_attributes import LEASE, NODE, PHASE, PHASE_SINCE, POOL, RUNG
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import (
    CLUSTER_POOL,
    BudgetPolicy,
    BudgetState,
    Holders,
    Lease,
    LeaseRelease,
    LeaseRequest,
    LeaseWanted,
    NodeUnhealthy,
    UnhealthyReport,
    held_by_remedy,
)
from remedy.disruption.budget_messages import (
    ClosedHolders,
    HeldCheck,
    HeldNodes,
    HolderCheck,
    HumanHold,
    HumanWait,
    PoolHolders,
)
from remedy.disruption.budget_signals import LeaseAnswer, UnhealthyReports
from remedy.disruption.quarantine import CordonAsked
from remedy.ladder.describe import GIVEN_BACK, HELD
from remedy.ladder.remediation import Phase
from remedy.scan.cluster import FleetView

log = logging.getLogger(__name__)
# Why an update could not ask; the signal then does (asking twice is no harm): no budget running
# yet (the signal starts it), one from before the update, the server's cap on a workflow's
# updates in flight (history.maxInFlightUpdates), a continue-as-new, no answer in time.
NOT_ASKED_BY_UPDATE = (
    RPCError,
    UpdateRejected,
    UpdateUnknown,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
# A storm's reports to one budget, together in one update at most (about 0.4 KB each).
REPORTS_PER_CALL = 200
# How long they wait for the budget to take their update; then they go as signals, which the
# server keeps while the budget cannot run (its worker stalled, say).
REPORT_WAIT = timedelta(seconds=10)


class BudgetActivities:
    def __init__(
        self,
        client: Client,
        pool_size: Callable[[str], int],
        policy: BudgetPolicy,
        fleet: FleetView | None = None,
        report_wait: timedelta = REPORT_WAIT,
    ) -> None:
        self._client, self._pool_size, self._policy = client, pool_size, policy
        self._report_wait = report_wait.total_seconds()
        self._fleet = fleet  # None: no holds for a human are found (nodes not readable)
        self._by_update: bool | None = None  # leases asked by update: not yet known
        self._reports = GroupCommit(self._report, REPORTS_PER_CALL)  # per (budget, queue)

    async def _size(self, pool: str) -> int:
        # The cluster client is synchronous: keep it off the worker's event loop.
        with temporal_errors():
            return await asyncio.to_thread(self._pool_size, pool)

    async def _gpus(self, pool: str) -> dict[str, int]:
        """The GPUs of each node of the pool (none known without a fleet view)."""
        if self._fleet is None:
            return {}
        with temporal_errors():
            return await asyncio.to_thread(self._fleet.pool_gpus, pool)

    async def _signal(self, pool: str, task_queue: str, start: dict[str, Any]) -> None:
        """Signal-with-start of the pool's budget (``start``: the signal and its payload) on
        the budgets' queue of the asker's controller (one running already stays where it is)."""
        await self._client.start_workflow(
            DISRUPTION_BUDGET_WORKFLOW,
            BudgetState(pool=pool, policy=self._policy),
            id=budget_workflow_id(pool),
            task_queue=budget_task_queue(task_queue),
            static_summary=f"disruption budget of pool {pool}",
            priority=URGENT,  # its tasks go ahead of the ladders' that wait on them
            **start,
        )

    async def _report(self, to: tuple[str, str], reports: list[UnhealthyReport]) -> None:
        """Several reports in one update (a storm's); one alone, or where the update cannot
        go (no budget running yet: the signal starts it; a budget from before; the
        time-skipping server; not taken in time), each by signal-with-start, side by side:
        twice is no harm, a budget counts a node once."""
        pool, task_queue = to
        if len(reports) > 1 and await self.answers_by_update():
            handle = self._client.get_workflow_handle(budget_workflow_id(pool))
            try:
                together = UnhealthyReports(reports=reports)
                await asyncio.wait_for(NODES_UNHEALTHY.execute(handle, together), self._report_wait)
                return
            except (*NOT_ASKED_BY_UPDATE, TimeoutError) as err:
                log.debug("pool %s: %d reports go one by one: %s", pool, len(reports), err)
        signals = [NODE_UNHEALTHY.start_with(r) for r in reports]
        await asyncio.gather(*(self._signal(pool, task_queue, s) for s in signals))

    @act.REQUEST_LEASE.defn
    async def request_lease(self, wanted: LeaseWanted) -> LeaseAnswer:
        """Asked by an update where the ladder reads its answer: a lease the budget grants at
        once comes back in it, with no signal and no workflow task of the ladder's for the
        grant. Else (a ladder from before; ``NOT_ASKED_BY_UPDATE``) by signal, and the grant
        comes as one."""
        size, gpus = await self._size(wanted.pool), await self._gpus(wanted.pool)
        full = LeaseRequest(
            **wanted.model_dump(),
            pool_size=size,
            policy=self._policy,
            pool_gpus=sum(gpus.values()),
            node_gpus=gpus.get(wanted.node, 0),
        )
        if wanted.answer and await self.answers_by_update():
            handle = self._client.get_workflow_handle(budget_workflow_id(wanted.pool))
            try:
                return await ASK_LEASE.execute(handle, full)
            except NOT_ASKED_BY_UPDATE as err:
                log.debug("pool %s: %s asks by signal: %s", wanted.pool, wanted.holder, err)
        await self._signal(wanted.pool, wanted.task_queue, LEASE_REQUEST.start_with(full))
        return LeaseAnswer()

    async def answers_by_update(self) -> bool:
        """Not on the time-skipping server (tests, `remedy rehearse`): it writes an update's
        acceptance where a replay of the budget's history does not find it."""
        if self._by_update is None:
            try:
                await self._client.test_service.get_current_time(Empty())
                self._by_update = False
            except RPCError:
                self._by_update = True
        return self._by_update

    @act.RELEASE_LEASE.defn
    async def release_lease(self, release: LeaseRelease) -> None:
        """A ladder's release, signalled for it. A budget that is gone (terminated, never
        started) holds no lease to give back: said, and done."""
        handle = self._client.get_workflow_handle(budget_workflow_id(release.pool))
        if not await LEASE_RELEASE.send_if_running(handle, release):
            log.warning("pool %s has no budget to give %s back to", release.pool, release.holder)

    @act.REPORT_UNHEALTHY.defn
    async def report_unhealthy(self, report: NodeUnhealthy) -> None:
        size = await self._size(report.pool)
        full = UnhealthyReport(**report.model_dump(), pool_size=size, policy=self._policy)
        await self._signal(report.pool, report.task_queue, NODE_UNHEALTHY.start_with(full))

    @act.ASK_TO_CORDON.defn
    async def ask_to_cordon(self, report: NodeUnhealthy) -> CordonAsked:
        """The report, to the pool's budget and (with a cluster share) to the cluster's: each
        counts it, and answers the ladder (``holder``) with leave to cordon once its breaker
        lets it. Says which it asked: the ladder waits for each."""
        pools = [report.pool]
        if self._policy.cluster_share is not None and report.pool != CLUSTER_POOL:
            pools.append(CLUSTER_POOL)
        for budget in pools:
            size = await self._size(budget)
            full = UnhealthyReport(**report.model_dump(), pool_size=size, policy=self._policy)
            await self._reports.put((budget, report.task_queue), full)  # with others' reports
        return CordonAsked(budgets=pools)

    @act.CLOSED_WORKFLOWS.defn
    async def closed_workflows(self, check: HolderCheck) -> ClosedHolders:
        closed = []
        for workflow_id in check.workflow_ids:
            try:
                status = (await self._client.get_workflow_handle(workflow_id).describe()).status
            except RPCError as err:
                if err.status is not RPCStatusCode.NOT_FOUND:
                    raise
                status = None
            if status is not WorkflowExecutionStatus.RUNNING:
                closed.append(workflow_id)
        return ClosedHolders(workflow_ids=closed)

    @act.LEASE_HOLDERS.defn
    async def lease_holders(self, pool: PoolHolders) -> Holders:
        """The pool's running ladders and active checks that hold a lease, which of those
        ladders wait for an approval, and the ladders that wait for a lease (their phase), in
        the order they began to (``RemedyPhaseSince``), from their search attributes. A server
        that cannot list workflows (the time-skipping test server) answers none."""
        query = (
            f"(WorkflowType = '{NODE_REMEDIATION_WORKFLOW}' "
            f"OR WorkflowType = '{ACTIVE_CHECK_WORKFLOW}') AND ExecutionStatus = 'Running' "
            f"AND {POOL.name} = '{pool.pool}' AND ({LEASE.name} = '{HELD}' "
            f"OR {PHASE.name} = '{Phase.AWAITING_LEASE.value}')"
        )
        leases: list[Lease] = []
        people: list[HumanWait] = []
        asked: list[tuple[datetime, str, str, str, str]] = []  # since, holder, node, queue, run
        try:
            async for w in self._client.list_workflows(query):
                attrs = w.typed_search_attributes
                node = attrs.get(NODE) or w.id.split("/", 1)[-1]
                since = attrs.get(PHASE_SINCE) or w.start_time
                if attrs.get(LEASE) != HELD:  # waiting for a lease (asked, or about to)
                    asked.append((since, w.id, node, w.task_queue, w.run_id))
                    continue
                # Its scope is not listed: a node lease (the cap errs on the safe side).
                leases.append(Lease(holder=w.id, node=node, granted_at=w.start_time))
                if attrs.get(PHASE) == Phase.AWAITING_APPROVAL.value:
                    what = f"approval for {attrs.get(RUNG)}" if attrs.get(RUNG) else "approval"
                    people.append(HumanWait(holder=w.id, node=node, what=what, since=since))
        except RPCError as err:
            if err.status is not RPCStatusCode.UNIMPLEMENTED:
                raise
            log.warning(
                "this server cannot list workflows: pool %s starts with no holders", pool.pool
            )
        nodes = await self._nodes(pool.pool)
        cordoned = set(held_by_remedy(nodes))
        size = await self._size(pool.pool) if asked else 0
        gpus = await self._gpus(pool.pool)
        leases = [le.model_copy(update={"node_gpus": gpus.get(le.node, 0)}) for le in leases]
        waiting = [
            LeaseRequest(
                holder=holder,
                node=node,
                pool=pool.pool,
                task_queue=queue,
                cordoned=node in cordoned,
                pool_size=size,
                policy=self._policy,
                pool_gpus=sum(gpus.values()),
                node_gpus=gpus.get(node, 0),
                run=run,
            )
            for _, holder, node, queue, run in sorted(asked)
        ]
        held = await self._held_for_human(cordoned)
        return Holders(
            leases=leases,
            held=[h.model_copy(update={"gpus": gpus.get(h.node, 0)}) for h in held],
            waiting=waiting,
            waiting_for_human=people,
        )

    async def _nodes(self, pool: str) -> list[NodeFacts]:
        """The pool's nodes (none when they cannot be read: no holds for a human found)."""
        if self._fleet is None:
            return []
        with temporal_errors():
            nodes = await asyncio.to_thread(self._fleet.nodes)
        return [n for n in nodes if n.pool == pool]

    async def _held_for_human(self, cordoned: set[str]) -> list[HumanHold]:
        """The pool's nodes under remedy's cordon whose ladder is not running: left for a
        person (or orphaned), out of service either way, so they count — but for one whose
        ladder gave its share back (``on_approval_timeout: release``)."""
        now = datetime.now(UTC)
        held = []
        for node in sorted(cordoned):
            last = await described(self._client, remediation_workflow_id(node))
            if last is None or last.status is not WorkflowExecutionStatus.RUNNING:
                gave_back = (
                    last is not None and last.typed_search_attributes.get(LEASE) == GIVEN_BACK
                )
                since = last.close_time or now if last else now
                held.append(HumanHold(node=node, since=since, counted=not gave_back))
        return held

    @act.HELD_NODES.defn
    async def held_nodes(self, check: HeldCheck) -> HeldNodes:
        if self._fleet is None:
            return HeldNodes(nodes=check.nodes)  # cannot tell: every hold stays
        with temporal_errors():
            nodes = await asyncio.to_thread(self._fleet.nodes)
        return HeldNodes(nodes=held_by_remedy(nodes, set(check.nodes)))

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.request_lease,
            self.release_lease,
            self.report_unhealthy,
            self.ask_to_cordon,
            self.closed_workflows,
            self.lease_holders,
            self.held_nodes,
        ]
