"""Starting the Temporal servers the tests use, and moving the time-skipping server's clock, in
ways that hold on a loaded machine.

- **Start-up.** The SDK gives a server 5 s to answer after it is spawned; a busy 2-core
  machine can take longer. And a dev server that loses one of the ports it picks for its own
  services to another starting at the same moment (another suite's, on a shared machine) exits:
  it is started again, once.
- **Sleep.** The time-skipping server's sleep RPC fires every timer on the way and waits for
  the workflow tasks they wake, with the client's default deadline of 30 s. On a loaded machine
  ten minutes of a workflow's timers can take longer: the deadline expired ("Timeout expired"),
  or the server, holding the same deadline, cancelled the stream first, which the client reads
  as "h2 protocol error: stream error received". The sleep now has a deadline as long as a test
  may take, and a call cut short anyway (by its deadline or the transport) is made again for
  what is left of the span, measured on the server's clock. Any other error is raised.
- **A result.** ``handle.result()`` unlocks the server's clock while it waits, and the server
  skips, whenever nothing runs, to the next timer it knows — also in the moment between the
  workflow's end and the client locking the clock again. With nothing pending but the 10-year
  execution timeout it gives every workflow, that is ten years on: a GPU's hardware record and
  the pool's budget time out (a recurrence test then found no recovery to resume from; seen
  idle too, more often loaded). ``finished`` waits on the server's clock instead: it polls,
  moving the clock a step at a time, and reads the result with the clock locked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.api.testservice.v1 import SleepRequest
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

STARTUP = timedelta(seconds=60)
START_TRIES = 2
SLEEP_DEADLINE = timedelta(minutes=4)  # inside the suite's 5-minute limit per test
SLEEP_TRIES = 5
STEP = timedelta(minutes=1)
PATIENCE = timedelta(days=2)
R = TypeVar("R")
CUT_SHORT = {RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE}


async def started(start: Callable[[], Awaitable[WorkflowEnvironment]]) -> WorkflowEnvironment:
    """``start()`` (one of WorkflowEnvironment's, with ``STARTUP`` as its timeout), and once
    more if the server did not come up."""
    for attempt in range(1, START_TRIES + 1):
        try:
            return await start()
        except RuntimeError as err:
            if attempt == START_TRIES or not str(err).startswith("Failed starting"):
                raise
    raise AssertionError("unreachable")


async def clock_sleep(env: WorkflowEnvironment, duration: timedelta | float) -> None:
    """Move the time-skipping server's clock ``duration`` on (``env.sleep`` in the tests)."""
    span = duration if isinstance(duration, timedelta) else timedelta(seconds=duration)
    until = await env.get_current_time() + span
    for _ in range(SLEEP_TRIES):
        left = until - await env.get_current_time()
        if left <= timedelta(0):
            return
        request = SleepRequest()
        request.duration.FromTimedelta(left)
        try:
            await env.client.test_service.unlock_time_skipping_with_sleep(
                request, timeout=SLEEP_DEADLINE
            )
            return
        except RPCError as err:
            if not _cut_short(err):
                raise
    raise TimeoutError(f"the time-skipping server did not reach {until} in {SLEEP_TRIES} sleeps")


def _cut_short(err: RPCError) -> bool:
    return err.status in CUT_SHORT or str(err).startswith("h2 protocol error")


async def finished(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[Any, R],
    step: timedelta = STEP,
    patience: timedelta = PATIENCE,
) -> R:
    """The result of ``handle``'s run (and the runs it continued as), once closed: the server's
    clock moved ``step`` at a time (at most ``step`` past the end), never skipped beyond. A
    later run under the same id, started by someone else, is not waited for."""
    run_id, waited = handle.result_run_id or handle.run_id, timedelta(0)
    while True:
        run = env.client.get_workflow_handle(handle.id, run_id=run_id)
        status = (await run.describe()).status
        if status is WorkflowExecutionStatus.CONTINUED_AS_NEW:
            run_id = await _continued_as(run)
        elif status is not WorkflowExecutionStatus.RUNNING:
            break
        elif waited >= patience:
            raise AssertionError(f"{handle.id} still running after {patience} of server time")
        else:
            await env.sleep(step)
            waited += step
    with env.auto_time_skipping_disabled():  # closed: this returns at once, clock locked
        return await handle.result()


async def _continued_as(run: WorkflowHandle[Any, Any]) -> str:
    last = (await run.fetch_history()).events[-1]
    return last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
