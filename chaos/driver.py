"""The harness's hand on an experiment: it injects faults on idle nodes and reports them as an
agent would (signal-with-start), approves rungs that wait for approval, and takes back, as a
person would, a node whose ladder ended needing a human. It keeps a number of ladders going at
once and knows which nodes are busy."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError

from adapters.sim.cluster import REMEDY_CORDON
from adapters.sim.identity import as_agent
from adapters.sim.node import SimPod
from chaos.stage import Stage
from contract.messages import APPROVE
from contract.names import remediation_workflow_id
from contract.search_attributes import OUTCOME, PHASE, RUNG
from remedy.core.models import NodeRef
from remedy.ladder.remediation import FindingReport, Outcome, Phase
from remedy.trust.decisions import ApproveRequest
from workers.client import report_finding

log = logging.getLogger(__name__)
TICK_S = 0.5
# A busy, killed-again-and-again run climbs slowly; one whose ladders move but none ends in
# this many stall periods goes round in circles.
STALL_BOUND = 3
BY = "chaos harness"


class Stall:
    """Ladders stall when none started, ended or moved (phase or rung) for ``stall_s``, or
    none started or ended for ``STALL_BOUND`` times that: a busy run whose controller is
    killed again and again climbs slowly, but it climbs."""

    def __init__(self, stall_s: float, now: float) -> None:
        self.stall_s = stall_s
        self.moved = self.turned = now
        self.seen: tuple[int, int, int] = (0, 0, 0)

    def stalled(self, started: int, busy: int, moves: int, now: float) -> bool:
        if (started, busy, moves) != self.seen:
            if (started, busy) != self.seen[:2]:
                self.turned = now
            self.moved, self.seen = now, (started, busy, moves)
        return now - self.moved > self.stall_s or now - self.turned > STALL_BOUND * self.stall_s


@dataclass
class Injected:
    node: str
    report: FindingReport
    reported: bool = False


class Driver:
    def __init__(self, st: Stage, faults: dict[str, float], copies: int = 1) -> None:
        """``copies``: identical reports sent at once for each fault (one is an agent)."""
        self.st, self.faults, self.copies = st, faults, copies
        self.injected: list[Injected] = []
        self.busy: dict[str, Injected] = {}
        self.approved: set[tuple[str, str]] = set()  # (run id, rung)
        self.handed_back = 0  # nodes a person took back after needs_human
        # Where each busy ladder stood when last seen (run id, phase, rung), and how many times
        # one of them moved: a ladder that climbs is not stuck, however long it takes.
        self.stood: dict[str, tuple[str, str, str]] = {}
        self.moves = 0

    async def run(self, total: int, in_flight: int, stall_s: float) -> bool:
        """Inject ``total`` faults, ``in_flight`` ladders at most at once, until every ladder
        ended; False when they stall (``Stall``: some are stuck, or go round)."""
        loop = asyncio.get_running_loop()
        stall = Stall(stall_s, loop.time())
        while len(self.injected) < total or self.busy:
            await self.tick(total, in_flight)
            if stall.stalled(len(self.injected), len(self.busy), self.moves, loop.time()):
                return False
            await asyncio.sleep(TICK_S)
        return True

    async def tick(self, total: int, in_flight: int) -> None:
        try:
            await self._refresh()
            while len(self.busy) < in_flight and len(self.injected) < total and self._inject():
                pass
            await self._report()
        except (RPCError, RuntimeError) as err:  # the server is down: next tick
            log.info("tick: %s", err)

    async def send(self, injected: Injected, copies: int) -> None:
        """``copies`` identical reports of one fault, all at once."""
        await asyncio.gather(*(self._send(injected) for _ in range(copies)))

    async def _send(self, injected: Injected) -> None:
        await report_finding(
            self.st.client,
            NodeRef(name=injected.node, pool=self.st.pool),
            as_agent(injected.report, datetime.now(UTC)),
            node_task_queue=self.st.agents_queue,
            task_queue=self.st.controller_queue,
        )

    async def _report(self) -> None:
        for injected in list(self.busy.values()):
            if not injected.reported:
                await self.send(injected, self.copies)
                injected.reported = True

    def _inject(self) -> bool:
        st = self.st
        with st.store.transaction() as world:
            idle = sorted(
                n.name
                for n in world.fleet.nodes.values()
                if n.name not in self.busy and not n.faults and not n.unschedulable
            )
            if not idle:
                return False
            node = st.rng.choice(idle)
            kind = st.rng.choices(list(self.faults), weights=list(self.faults.values()))[0]
            sim = world.fleet.node(node)
            if not any(p.uses_gpus for p in sim.pods):  # work lands on the node again
                sim.pods.append(SimPod(f"train-{node}", uses_gpus=True))
            finding = world.fleet.inject(node, kind, st.rng.randrange(world.fleet.gpus_per_node))
        runbook = st.runbooks.match(finding)
        assert runbook is not None, f"no runbook for {finding.headline()}"
        injected = Injected(node=node, report=FindingReport(finding=finding, runbook=runbook))
        self.injected.append(injected)
        self.busy[node] = injected
        return True

    async def _refresh(self) -> None:
        for node, injected in list(self.busy.items()):
            if not injected.reported:
                continue
            handle = self.st.client.get_workflow_handle(remediation_workflow_id(node))
            desc = await handle.describe()
            if desc.status is WorkflowExecutionStatus.RUNNING:
                self._seen_at(node, desc)
                if desc.typed_search_attributes.get(PHASE) == Phase.AWAITING_APPROVAL.value:
                    await APPROVE.send(handle, ApproveRequest(by=BY))
                    self.approved.add((desc.run_id, desc.typed_search_attributes.get(RUNG, "")))
                continue
            del self.busy[node]
            self.stood.pop(node, None)
            if desc.typed_search_attributes.get(OUTCOME) == Outcome.NEEDS_HUMAN.value:
                self._hand_back(node)

    def _seen_at(self, node: str, desc: WorkflowExecutionDescription) -> None:
        found = desc.typed_search_attributes
        stood = (desc.run_id or "", found.get(PHASE) or "", found.get(RUNG) or "")
        if self.stood.get(node) != stood:
            self.stood[node] = stood
            self.moves += 1

    def _hand_back(self, node: str) -> None:
        """A person fixed the node and gave it back (so the pool does not run out)."""
        with self.st.store.transaction() as world:
            sim = world.fleet.node(node)
            sim.faults.clear()
            if sim.annotations.pop(REMEDY_CORDON, None) is not None:
                sim.unschedulable = False
        self.handed_back += 1
