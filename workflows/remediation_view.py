"""What the Web UI and `remedy status` see of a ladder: its current details, its search
attributes, and the record of each attempt — kept in step with the ladder's state."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import datetime

from temporalio import workflow

from contract import search_attributes
from workflows import metrics

with workflow.unsafe.imports_passed_through():
    from remedy.core.models import Action, Scope
    from remedy.ladder.describe import NodeIndex, remediation_details, remediation_index
    from remedy.ladder.gpu_ladder import faulty_gpus
    from remedy.ladder.remediation import (
        MAX_REFUSALS,
        Attempt,
        AttemptResult,
        Phase,
        RemediationState,
    )
    from remedy.trust.decisions import Refusal


class RemediationView:
    def __init__(self, state: RemediationState) -> None:
        self._state = state
        self._indexed: NodeIndex | None = None  # what the search attributes say now
        self._due = False  # a publish waits for the end of this turn: one upsert a turn

    def enter(self, phase: Phase) -> None:
        self._state.phase, self._state.phase_since = phase, workflow.now()
        self.publish()

    def publish(self) -> None:
        """Keep the UI's current details and the search attributes in step with the state, at
        the end of this turn of the workflow's event loop: the changes of one turn (a phase
        entered, the lease granted in the answer, the next phase) are one upsert."""
        if self._due:
            return
        self._due = True
        asyncio.get_running_loop().call_soon(self.settle)

    def settle(self) -> None:
        """Publish what waits, now."""
        if self._due:
            self._due = False
            self._publish()

    @contextlib.contextmanager
    def settling(self) -> Iterator[None]:
        """Around the run: what waits is published before it ends, continues as new or fails
        (no command may follow the last)."""
        try:
            yield
        finally:
            self.settle()

    def _publish(self) -> None:
        """Upserts are commands, so only on a change."""
        state = self._state
        workflow.set_current_details(remediation_details(state))
        last = self._indexed
        index = remediation_index(state, since=state.phase_since)
        if last is not None and (index.phase, index.rung) == (last.phase, last.rung):
            index.phase_since = last.phase_since  # a rung's settle or verify: same phase
        if index != self._indexed:
            workflow.upsert_search_attributes(search_attributes.updates(index))
            self._indexed = index

    def refused(self, message: str, why: str) -> None:
        """A message the ladder did not take: kept (the latest MAX_REFUSALS), counted, logged
        and published where operators look."""
        state = self._state
        refusal = Refusal(at=workflow.now(), verb=message, why=why)
        state.refused = [*state.refused, refusal][-MAX_REFUSALS:]
        state.refusals += 1
        metrics.message_refused(state.node.pool, message)
        workflow.logger.warning("%s: %s refused: %s", state.node.name, message, why)
        self.publish()

    def record(
        self,
        rung: int,
        action: Action,
        started: datetime,
        result: AttemptResult,
        detail: str,
        scope: Scope | None = None,
    ) -> None:
        """An attempt into the ladder's record (rung -1: cordon and restore, outside the
        ladder), its duration into the metrics. ``scope``: by default the rung's; a GPU-scoped
        attempt keeps the GPUs it acted on (what it did is not done for another GPU)."""
        now, state = workflow.now(), self._state
        ladder = state.runbook.ladder if state.runbook else []
        if scope is None and 0 <= rung < len(ladder) and ladder[rung].action is action:
            scope = ladder[rung].scope
        gpus = faulty_gpus(state.trigger, state.findings) if scope is Scope.GPU else None
        self._state.attempts.append(
            Attempt(
                rung=rung,
                action=action,
                started_at=started,
                finished_at=now,
                result=result,
                detail=detail,
                epoch=self._state.epoch,
                gpus=gpus,
            )
        )
        seconds = (now - started).total_seconds()
        metrics.rung_finished(self._state.node.pool, action.value, result.value, seconds)
        self.publish()
