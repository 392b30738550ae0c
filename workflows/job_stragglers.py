"""The JobGuard's straggler watch: what it does with the straggler detector's report that comes
with the job's progress (remedy/attribution/suspicions.py keeps the ledger).

A new suspect, one at a time per job: the job is asked to checkpoint (the protocol elastic grows
use), then the node's ladder starts with a ``SlowNode`` finding (runbooks/slow-node.yaml), whose
first rung, the deep diagnose, runs in the job's checkpoint window. The ladder's word is polled
on a timer (``LADDER_PROOF``): proven (it took on the runbook of the fault it found: the node is
cordoned and drained, the job's pods leave through the checkpoint protocol and the guard
restarts the job elastically, as after any platform failure) or unproven (it passed: nothing
was done to the node). Deterministic: timers, not wall time; no command unless a report named a
suspect (old histories replay as they were)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows import job_sizes
from workflows.common import RIDE_OUT, cause_of
from workflows.metrics import slow_node_suspicion

with workflow.unsafe.imports_passed_through():
    from contract.names import node_task_queue
    from remedy.attribution.guard import GuardInput, JobLedger
    from remedy.attribution.suspicions import (
        ProofCheck,
        Suspicion,
        SuspicionState,
        counts,
        expire,
        heard,
        next_expiry,
        next_to_prove,
    )
    from remedy.core.durations import format_duration
    from remedy.core.models import Finding, NodeRef, Severity
    from remedy.detection.stragglers.models import SLOW_NODE, STRAGGLERS, StragglerReport
    from remedy.scan.fleet import FindingStart

SHOWN = 5  # suspicions listed in the guard's details (the newest)


class StragglerWatch:
    def __init__(
        self,
        inp: GuardInput,
        ledger: JobLedger,
        watching: Callable[[], bool],
        show: Callable[[str], None],
    ) -> None:
        self._input, self._ledger, self._watching, self._show = inp, ledger, watching, show
        self._policy = inp.policy.suspicions

    def heard(self, report: StragglerReport) -> None:
        """The detector's verdict that came with the job's progress: into the ledger."""
        self._update(lambda s: heard(expire(s, workflow.now(), self._policy), report, self._policy))

    async def run(self) -> None:
        """Prove the suspects as their turn comes (the guard watching its running job), and
        expire those that waited unrenewed. Runs for the guard's life."""
        while True:
            self._update(lambda s: expire(s, workflow.now(), self._policy))  # before a turn
            due = next_expiry(self._ledger.suspicions, self._policy)
            wait = max(due - workflow.now(), timedelta(0)) if due else None
            try:
                await workflow.wait_condition(
                    lambda: self._turn() is not None, timeout=wait, timeout_summary="expiry"
                )
            except TimeoutError:
                continue
            suspect = self._turn()
            if suspect is not None:
                await self._prove(suspect)

    def _turn(self) -> Suspicion | None:
        """The suspect to prove now: a proof the last run left (continue-as-new), or the next."""
        proving = [s for s in self._ledger.suspicions if s.state is SuspicionState.PROVING]
        if proving:
            return proving[0]
        return next_to_prove(self._ledger.suspicions) if self._watching() else None

    async def _prove(self, suspect: Suspicion) -> None:
        node = suspect.node
        if not suspect.ladder:
            self._set(node, state=SuspicionState.PROVING, checkpoint="asked")
            self._show(f"slow node suspected: {node}; the job checkpoints, its ladder proves it")
            done = await job_sizes.checkpointed(
                self._input.job, self._input.elastic, f"before {node}'s proof"
            )
            grace = self._input.elastic.checkpoint_grace
            said = (
                f"acknowledged {workflow.now():%H:%M}"
                if done
                else f"none in {format_duration(grace)}"
            )
            try:
                started = await self._start_ladder(suspect)
            except ActivityError as err:  # e.g. a ladder for another fault still runs there
                why = f"its ladder could not start: {cause_of(err)}"
                self._end(node, SuspicionState.EXPIRED, why)
                return
            if not started:
                self._end(node, SuspicionState.EXPIRED, "the node was replaced since")
                return
            self._set(node, checkpoint=said, ladder=started)
            check = ProofCheck(ladder=started)
        else:  # a proof the last run began: its ladder goes on
            check = ProofCheck(ladder=suspect.ladder)
        while True:
            try:
                seen = await act.LADDER_PROOF.execute(
                    check,
                    start_to_close_timeout=timedelta(seconds=30),
                    **RIDE_OUT,
                    summary=f"how {node}'s proof goes",
                )
            except ActivityError as err:
                workflow.logger.warning("%s: no word from its ladder: %s", node, cause_of(err))
                seen = None
            if seen is not None and seen.state is not None:
                self._end(node, seen.state, seen.detail)
                return
            await workflow.sleep(self._policy.ladder_poll, summary=f"{node}'s ladder proves it")

    async def _start_ladder(self, suspect: Suspicion) -> str:
        inp = self._input
        finding = Finding(
            node=suspect.node,
            check=STRAGGLERS.check,
            reason=SLOW_NODE,
            severity=Severity.WARNING,
            observed_at=workflow.now(),
            evidence=f"job {inp.job}: {suspect.evidence}",
        )
        goodput = self._ledger.goodput  # the job's pool is its nodes' (the budget's)
        pool = goodput.pool if goodput is not None and goodput.pool else "default"
        started = await act.REMEDIATE_FINDING.execute(
            FindingStart(
                node=NodeRef(name=suspect.node, pool=pool),
                finding=finding,
                task_queue=inp.controller_task_queue or workflow.info().task_queue,
                node_task_queue=inp.node_task_queue or node_task_queue(suspect.node),
                # A ladder for another fault owns the node now: the suspicion would only join
                # it, unproven. Wait for it to close (a while), or give the suspicion up.
                after_running_ladder=True,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            **RIDE_OUT,
            summary=f"prove {suspect.node} slow",
        )
        return started.workflow_id

    def _open(self, node: str) -> Suspicion | None:
        return next((s for s in self._ledger.suspicions if s.node == node and s.open), None)

    def _set(self, node: str, **update: object) -> None:
        mine = self._open(node)
        self._update(lambda ss: [s.model_copy(update=update) if s is mine else s for s in ss])

    def _end(self, node: str, state: SuspicionState, detail: str) -> None:
        self._set(node, state=state, ended_at=workflow.now(), detail=detail)
        self._show(f"slow node {node}: {state.value} ({detail})")

    def _update(self, change: Callable[[list[Suspicion]], list[Suspicion]]) -> None:
        """Change the ledger, counting each state reached (the metric)."""
        ledger = self._ledger
        before = {(s.node, s.first_seen): s.state for s in ledger.suspicions}
        after = change(ledger.suspicions)
        for s in after:
            if before.get((s.node, s.first_seen)) is not s.state:
                slow_node_suspicion(s.state.value)
        ledger.suspicions = after


def suspicion_lines(ledger: JobLedger) -> list[str]:
    """The suspicions in the guard's details: counts, then the newest."""
    if not ledger.suspicions:
        return []
    tally = " · ".join(f"{st.value} {n}" for st, n in counts(ledger.suspicions).items() if n)
    return [f"slow-node suspicions: {tally}"] + [
        f"- {s.last_seen:%m-%d %H:%M} {s.node}: {s.state.value}"
        + (f" ({s.detail})" if s.detail else f" — {s.evidence}" if s.evidence else "")
        for s in ledger.suspicions[-SHOWN:]
    ]
