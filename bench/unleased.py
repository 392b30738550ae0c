"""The budget bench's like-for-like baseline: the same ladder, drain rung included, with no
lease to ask for, hold or give back. The latency a lease adds is the leased ladder's p50 less
this one's; less the cordon → diagnose baseline's, it is the drain rung and its lease together
(bench/budget_bench.py). Bench code only: a controller never runs it."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

from contract.names import NODE_REMEDIATION_WORKFLOW
from remedy.ladder.remediation import Outcome, RemediationResult
from workflows.disruption_lease import DisruptionLease
from workflows.node_remediation import NodeRemediation


class NoLease(DisruptionLease):
    """Every rung may disrupt at once; nothing is asked of, or given back to, a budget."""

    async def hold(self, *_: Any, **__: Any) -> None:
        return None

    async def release(self, outcome: Outcome) -> None:
        return None


@workflow.defn(name=NODE_REMEDIATION_WORKFLOW)
class UnleasedRemediation(NodeRemediation):
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        super().__init__(raw)
        self._lease = NoLease(self._state, self._view)  # what _gated holds before a drain

    @workflow.run
    async def run(self, raw: RawValue) -> RemediationResult:
        return await super().run(raw)
