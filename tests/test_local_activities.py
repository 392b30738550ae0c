"""A controller activity run as a local one (``ActivityDef.execute(local=True)``, a ladder's
first steps) reads like a regular one to the workflow: a failure is an ``ActivityError`` with
its cause, and a cancellation (an abort) is ``asyncio.CancelledError``, never a failure."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from contract.defs import ActivityDef, Queue

REFUSE = ActivityDef[None, None]("refuse_locally", None, None, Queue.CONTROLLER)
HANG = ActivityDef[None, None]("hang_locally", None, None, Queue.CONTROLLER)


@REFUSE.defn
async def refuse_locally() -> None:
    raise ApplicationError("node opted out", type="ActionRefused", non_retryable=True)


@HANG.defn
async def hang_locally() -> None:
    await asyncio.sleep(3600)  # until cancelled


@workflow.defn(name="LocalSteps", sandboxed=False)
class LocalSteps:
    @workflow.run
    async def run(self, which: str) -> str:
        timeout = timedelta(seconds=30)
        step = (REFUSE if which == "refuse" else HANG).execute(
            None, local=True, start_to_close_timeout=timeout
        )
        task = asyncio.create_task(step)
        if which == "abort":
            await asyncio.sleep(0)  # scheduled, then the abort
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        except ActivityError as err:
            assert isinstance(err.cause, ApplicationError)
            return f"failed: {err.cause.type}"
        return "done"


async def test_a_local_failure_is_an_activity_error_and_a_cancellation_is_no_failure(
    time_env: WorkflowEnvironment,
) -> None:
    queue = f"local-{uuid.uuid4().hex[:8]}"
    async with Worker(
        time_env.client,
        task_queue=queue,
        workflows=[LocalSteps],
        activities=[refuse_locally, hang_locally],
    ):
        refused, aborted = [
            await time_env.client.execute_workflow(
                LocalSteps.run, which, id=f"{queue}-{which}", task_queue=queue
            )
            for which in ("refuse", "abort")
        ]
    assert refused == "failed: ActionRefused"
    assert aborted == "cancelled"
