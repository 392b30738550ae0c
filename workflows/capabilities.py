"""Before a rung its node performs itself (diagnose, reset, reboot), the ladder asks the node
whether it can; a rung it cannot perform is recorded as skipped, with the node's reason, and
the ladder goes on to the next one instead of running it and "verifying".

The node answers from its dependency checks (remedy/acting/capabilities.py). When it cannot be asked
(a dead agent, an agent from before the question existed), the rung runs as before: it fails
on its own if the node cannot do it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import PATIENT_RETRY, cause_of
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from remedy.core.actions import ACTIONS, Where
    from remedy.core.models import Action, ProbeRequest
    from remedy.ladder.remediation import AttemptResult, RemediationInput, RemediationState

ASK_TIMEOUT = timedelta(seconds=30)  # the cheap checks run now; NVML may take its timeout
ASK_DEADLINE = timedelta(minutes=2)


class NodeCapabilities:
    def __init__(
        self, inp: RemediationInput, state: RemediationState, view: RemediationView
    ) -> None:
        self._input, self._state, self._view = inp, state, view

    async def skips(self, index: int, action: Action) -> bool:
        """Whether rung ``index`` is skipped: recorded, with why, when the node cannot do it."""
        if ACTIONS[action].where is not Where.NODE:
            return False
        asked = workflow.now()
        why = await self._why_not(action)
        if why is None:
            return False
        workflow.logger.info("%s: skips %s: %s", self._state.node.name, action.value, why)
        self._view.record(index, action, asked, AttemptResult.SKIPPED, f"node cannot: {why}")
        return True

    async def _why_not(self, action: Action) -> str | None:
        node = self._state.node
        try:
            capabilities = await act.CAPABILITIES.execute(
                ProbeRequest(node=node),
                task_queue=self._input.node_task_queue,
                schedule_to_start_timeout=self._input.node_pickup_timeout,
                start_to_close_timeout=ASK_TIMEOUT,
                retry_policy=PATIENT_RETRY,
                schedule_to_close_timeout=ASK_DEADLINE,
                summary=f"can {node.name} {action.value}?",
            )
        except ActivityError as err:
            workflow.logger.warning(
                "%s: could not ask whether it can %s (%s); running the rung",
                node.name,
                action.value,
                cause_of(err),
            )
            return None
        return capabilities.why_not(action)
