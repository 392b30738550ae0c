"""A model-based test of the ladder: a hypothesis state machine that interleaves findings on
different GPUs, aborts, clears, approvals, the passing of time (lease grants, tolerance windows,
approval timeouts), API failures before an effect, answers lost after one, a drain that a
PodDisruptionBudget blocks, and agents that die and come back — against the real
NodeRemediation and DisruptionBudget workflows on the time-skipping server, with the real
activities over the simulated fleet. After every step it checks:

- an accepted abort stops the ladder (closed within a bounded stretch of server time);
- no disruptive action begins on a node after an abort was accepted there (one already under
  way may land), until a new ladder starts on it;
- a worse fault is never left unhandled: a ladder that gave the node back took every worse
  report it received (as its trigger, or as an escalation);
- the pool's budget never has more lease holders than its cap;
- every cordon of remedy's has an owner: a running ladder, one that left the node to a person
  (needs_human, aborted, replaced), or a restore that failed and says so;
- no keyed effect lands twice (exactly once).

Aborts, clears and approvals go as the signals of the same names (the ladder's handlers make
the same change as the updates'): the time-skipping server writes an update's acceptance in
another place in the history than a real server, and a replay of such a history (a query of a
closed ladder, a worker evicting it) fails as non-deterministic. tests/test_abort_wins.py and
tests/test_operator_updates.py cover the updates themselves.

``tests/test_ladder_model.py`` runs a bounded number of examples in ``make test``; ``make
chaos`` runs many more (REMEDY_MODEL_EXAMPLES).
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, invariant, rule
from temporalio.service import RPCError

from adapters.sim.cluster import REMEDY_CORDON
from contract.messages import ABORT, APPROVE, BUDGET_STATE, CLEAR
from contract.names import budget_workflow_id
from remedy.core.errors import DrainBlocked, TransientError
from remedy.core.models import Action
from remedy.disruption.budget import BudgetState
from remedy.ladder.remediation import (
    AttemptResult,
    FindingReport,
    Outcome,
    RemediationState,
    outranks,
)
from remedy.trust.decisions import AbortRequest, ApproveRequest, ClearRequest
from tests.conftest import _shipped
from tests.ladder import report
from tests.ladder_model_fleet import (
    COUNTS,
    DISRUPTIVE,
    FAULTS,
    LEFT_TO_A_PERSON,
    NODES,
    STEPS,
    TIME_PIECE,
    Ladder,
    ModelFleet,
)
from workflows.node_remediation import NodeRemediation


class LadderModel(ModelFleet):
    # Nodes a fault was reported on: aborts, clears and approvals go mostly where ladders are.
    reported = Bundle("reported")

    # -- rules -------------------------------------------------------------------------------
    @initialize(target=reported, kind=st.sampled_from(FAULTS), gpu=st.integers(0, 7))
    def first_fault(self, kind: str, gpu: int) -> int:
        """Every interleaving starts with a ladder running."""
        return self.fault(0, kind, gpu)

    @rule(
        target=reported,
        node=st.integers(0, NODES - 1),
        kind=st.sampled_from(FAULTS),
        gpu=st.integers(0, 7),
    )
    def another_fault(self, node: int, kind: str, gpu: int) -> int:
        return self.fault(node, kind, gpu)

    @rule(target=reported, node=reported, kind=st.sampled_from(FAULTS), gpu=st.integers(0, 7))
    def a_second_fault_on_a_node_in_remediation(self, node: int, kind: str, gpu: int) -> int:
        return self.fault(node, kind, gpu)

    def fault(self, node: int, kind: str, gpu: int) -> int:
        name = self.names[node]
        finding = self.fleet.inject(name, kind, gpu=gpu)
        runbook = _shipped().match(finding)
        assert runbook is not None, f"{kind}: no runbook"
        sent = FindingReport(finding=finding, runbook=runbook)

        async def send() -> str:
            handle = await report(self.env.client, self.queues, finding, runbook)
            return handle.result_run_id or ""

        run_id = self.run(send(), f"fault({name}, {kind}, gpu {gpu})")
        if self.set_aside:
            return node
        ladders = self.ladders[name]
        COUNTS.reports += 1
        if not ladders or ladders[-1].run_id != run_id:
            ladders.append(Ladder(run_id=run_id))
            COUNTS.ladders += 1
        ladders[-1].reports.append(sent)
        return node

    @rule(node=reported, restore=st.booleans())
    def abort(self, node: int, restore: bool) -> None:
        request = AbortRequest(by="model", reason="interleaved", restore=restore)
        self.run(self.stop(self.names[node], ABORT, request), f"abort({node}, {restore})")

    @rule(node=reported)
    def clear(self, node: int) -> None:
        self.run(self.stop(self.names[node], CLEAR, ClearRequest(by="model")), f"clear({node})")

    @rule(node=reported)
    def approve(self, node: int) -> None:
        async def send() -> None:
            if await self.running(name):
                with contextlib.suppress(RPCError):  # it closed meanwhile
                    await APPROVE.send(self.handle(name), ApproveRequest(by="model"))

        name = self.names[node]
        self.run(send(), f"approve({node})")

    @rule(span=st.sampled_from(STEPS))
    def time_passes(self, span: timedelta) -> None:
        # In pieces, each bounded on its own: an hour of retries and timers can take longer
        # than one step's limit on a machine kept busy (a hang still fails within a piece).
        self.trace.append(f"time({span})")
        left = span
        while left > timedelta(0):
            piece = min(left, TIME_PIECE)
            self.run(self.sleep(piece))
            left -= piece

    @rule(
        action=st.sampled_from(["cordon", "drain", "restore", "reset_gpu", "reboot"]),
        times=st.integers(1, 4),
    )
    def api_fails(self, action: str, times: int) -> None:
        self.trace.append(f"api_fails({action}, {times})")
        self.fleet.fail_next(action, TransientError(f"{action}: the API is unavailable"), times)

    @rule(action=st.sampled_from(["drain", "kill_job", "reset_gpu", "reboot"]))
    def answer_lost(self, action: str) -> None:
        self.trace.append(f"answer_lost({action})")
        self.fleet.lose_answers(action)

    @rule(blocked=st.booleans())
    def pdb_blocks_drains(self, blocked: bool) -> None:
        self.trace.append(f"pdb_blocks_drains({blocked})")
        if blocked:
            self.fleet.break_action("drain", DrainBlocked("a PodDisruptionBudget forbids it"))
        else:
            self.fleet.broken.pop("drain", None)

    @rule(node=st.integers(0, NODES - 1), dead=st.booleans())
    def agent(self, node: int, dead: bool) -> None:
        self.trace.append(f"agent({node}, dead={dead})")
        if dead:
            self.fleet.silence_agent(self.names[node])
        else:
            self.fleet.revive_agent(self.names[node])

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def exactly_once(self) -> None:
        if self.set_aside:
            return
        COUNTS.steps += 1
        with self.recorded():
            assert self.fleet.doubled() == [], f"effects applied twice: {self.fleet.doubled()}"

    @invariant()
    def nothing_disruptive_after_an_abort(self) -> None:
        if self.set_aside:
            return
        with self.recorded():
            self._nothing_after_aborts()

    def _nothing_after_aborts(self) -> None:
        for node, ladders in self.ladders.items():
            aborted = [ld for ld in ladders if ld.aborted_at is not None]
            if not aborted or aborted[-1] is not ladders[-1]:
                continue  # a later report started a new ladder: it may act
            ladder = aborted[-1]
            assert ladder.aborted_at is not None
            since = [a for n, a in self.fleet.actions[ladder.aborted_at :] if n == node]
            late = [a for a in since if a in DISRUPTIVE]
            assert len(late) <= 1, f"{node}: disruptive actions after the abort: {since}"
            if ladder.closed_at is not None:
                after = [a for n, a in self.fleet.actions[ladder.closed_at :] if n == node]
                assert not DISRUPTIVE & set(after), f"{node}: after its aborted ladder: {after}"

    @invariant()
    def holders_within_the_cap(self) -> None:
        async def check() -> None:
            budget = await self._budget()
            if budget is None:
                return  # no budget yet: nobody asked for a lease
            COUNTS.budget_checks += 1
            assert len(budget.holders) <= max(budget.allowed, 1), budget.holders

        if hasattr(self, "env"):
            self.run(check())

    async def _budget(self) -> BudgetState | None:
        try:
            return await BUDGET_STATE.ask(
                self.env.client.get_workflow_handle(budget_workflow_id(self.queues.pool))
            )
        except RPCError:
            return None

    @invariant()
    def every_cordon_has_an_owner_and_worse_faults_are_taken(self) -> None:
        if hasattr(self, "env"):
            self.run(self._ends())

    async def _ends(self) -> None:
        for node in self.names:
            sim = self.fleet.node(node)
            if await self.running(node):
                continue
            ladders = self.ladders[node]
            if not ladders:
                assert REMEDY_CORDON not in sim.annotations, f"{node}: cordoned, no ladder"
                continue
            try:
                state: RemediationState = await self.handle(node).query(NodeRemediation.state)
            except RPCError:
                continue
            outcome = state.outcome
            run_id = (await self.latest(node))[1]
            if not ladders[-1].checked and outcome is not None:
                ladders[-1].checked = True
                COUNTS.outcomes[outcome.value] = COUNTS.outcomes.get(outcome.value, 0) + 1
                COUNTS.escalations += len(state.escalations)
                if run_id == ladders[-1].run_id:  # else its leftover went on in a new run
                    _worse_taken(node, ladders[-1], state)
            if REMEDY_CORDON in sim.annotations and outcome not in LEFT_TO_A_PERSON:
                # An earlier ladder left the cordon to a person (an abort without --restore)
                # and this one never cordoned: the budget's hold is the person's, and stays.
                budget = await self._budget()
                if budget is not None and node in {h.node for h in budget.held}:
                    continue
                last = state.attempts[-1] if state.attempts else None
                restore_failed = (
                    last is not None
                    and last.action is Action.RESTORE
                    and last.result is AttemptResult.FAILED
                )
                assert restore_failed, f"{node}: remedy's cordon, ladder ended {outcome}"


def _worse_taken(node: str, ladder: Ladder, state: RemediationState) -> None:
    """A ladder that gave the node back (recovered) took every report worse than its first
    trigger: as its trigger, or as an escalation of it."""
    if state.outcome is not Outcome.RECOVERED or not ladder.reports:
        return
    if state.runbook is None or state.trigger is None:
        return
    first = ladder.reports[0]
    taken = {e.to_runbook for e in state.escalations} | {state.runbook.name}
    taken |= {e.from_runbook for e in state.escalations}  # driven by it before moving on
    for sent in ladder.reports[1:]:
        superseded = not outranks(sent, state.trigger, state.runbook)  # the end was as bad
        if outranks(sent, first.finding, first.runbook) and not superseded:
            assert sent.runbook.name in taken, (
                f"{node}: {sent.finding.headline()} ({sent.runbook.name}) was worse than "
                f"{first.finding.headline()}; the ladder recovered on {state.runbook.name} "
                f"without it (escalations: {[e.describe() for e in state.escalations]})"
            )
