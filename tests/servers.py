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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio.api.testservice.v1 import SleepRequest
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

STARTUP = timedelta(seconds=60)
START_TRIES = 2
SLEEP_DEADLINE = timedelta(minutes=4)  # inside the suite's 5-minute limit per test
SLEEP_TRIES = 5
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
