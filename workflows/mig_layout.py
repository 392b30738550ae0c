"""A reset or a reboot of a MIG node is recovered only once the MIG manager applied the node's
layout again (remedy/acting/mig_layout.py): the layout is marked pending just before the action, put
back if the action did not run, and waited for after it (the rung's timeout bounds the wait).
A layout that failed, or is gone, fails the rung: the ladder climbs (fail closed)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import RIDE_OUT, cause_of

with workflow.unsafe.imports_passed_through():
    from remedy.acting.mig_layout import MigLayoutStep
    from remedy.core.models import ActionResult, NodeRef
    from remedy.runbook.schema import Rung


class OnNode(Protocol):
    """What the wrapped step runs on (workflows.node_steps.NodeSteps): its node."""

    @property
    def node(self) -> NodeRef: ...


S = TypeVar("S", bound=OnNode)

LAYOUT_CALL = timedelta(seconds=60)


def with_mig_layout(
    step: Callable[[S, Rung], Awaitable[ActionResult]],
) -> Callable[[S, Rung], Awaitable[ActionResult]]:
    """``step`` (a reset's or a reboot's), with the node's MIG layout around it."""

    async def run(steps: S, rung: Rung) -> ActionResult:
        node = steps.node
        ask = MigLayoutStep(node=node)
        before = await act.ASK_MIG_LAYOUT.execute(
            ask,
            start_to_close_timeout=LAYOUT_CALL,
            **RIDE_OUT,
            summary=f"MIG layout of {node.name}",
        )
        if not before.has_instances:
            return await step(steps, rung)
        mine = MigLayoutStep(node=node, before=before)
        try:
            result = await step(steps, rung)
        except (ActivityError, asyncio.CancelledError):
            await _keep(mine)
            raise
        if not result.ok:
            await _keep(mine)
            return result
        try:
            after = await act.MIG_LAYOUT_RESTORED.execute(
                mine,
                start_to_close_timeout=rung.timeout,
                heartbeat_timeout=min(rung.timeout, LAYOUT_CALL),
                retry_policy=RetryPolicy(maximum_attempts=1),
                summary=f"wait for MIG layout {before.config} on {node.name}",
            )
        except ActivityError as err:
            after = ActionResult(ok=False, detail=f"MIG layout {before.config}: {cause_of(err)}")
        return result.model_copy(
            update={"ok": after.ok, "detail": f"{result.detail}; {after.detail}"}
        )

    return run


async def _keep(step: MigLayoutStep) -> None:
    """Best effort: the action's own failure is what the ladder must see, and a state left
    pending only makes the MIG manager's next answer the one that counts."""
    try:
        await act.KEEP_MIG_LAYOUT.execute(
            step,
            gives_back=True,
            start_to_close_timeout=LAYOUT_CALL,
            **RIDE_OUT,
            summary=f"MIG layout of {step.node.name} as it was",
        )
    except ActivityError as err:
        workflow.logger.warning("MIG layout of %s left pending: %s", step.node.name, err)
