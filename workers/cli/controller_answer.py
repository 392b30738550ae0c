"""A command that asks the controller to do something on a node (`release-gpu`, `resume-node`)
starts a short workflow on the controller's queue and waits for its answer: a request already
under way, no answer in time, or the workflow's refusal come back as one `Refused` line."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, FailureError, WorkflowAlreadyStartedError

ANSWER_WITHIN_S = 60.0  # how long, in real time, the command waits for the controller

T = TypeVar("T")


class Refused(Exception):
    """The controller refused the request or did not answer it: the message says why."""


async def controller_answer(
    client: Client,
    workflow: str,
    request: Any,
    *,
    workflow_id: str,
    task_queue: str,
    result_type: type[T],
    under_way: str,
) -> T:
    """Start ``workflow`` for ``request`` and wait for its answer; ``under_way``: what to say
    when the same request (``workflow_id``) is already being done."""
    try:
        handle = await client.start_workflow(
            workflow, request, id=workflow_id, task_queue=task_queue, result_type=result_type
        )
    except WorkflowAlreadyStartedError:
        raise Refused(under_way) from None
    try:
        return await asyncio.wait_for(handle.result(), ANSWER_WITHIN_S)
    except TimeoutError:
        raise Refused(
            f"no answer in {ANSWER_WITHIN_S:.0f} s (is the controller running?); "
            f"workflow {handle.id} may still do it"
        ) from None
    except WorkflowFailureError as exc:
        cause = exc.cause
        why = cause.cause if isinstance(cause, ActivityError) else cause
        # The refusal in its own words, without the error type the failure carries.
        raise Refused(why.message if isinstance(why, FailureError) else str(why)) from None
