"""The simulated node's clock during a rehearsal: the time-skipping server's clock, so a fault
that lasts two minutes has passed when the workflow looks again two skipped minutes later.

Why this is the workflow's time under time skipping: the server skips only while nothing is
outstanding — it holds skipping while an activity is scheduled or running — so whenever the
simulated node is read (always from an activity: a probe, an action) the server's clock has
been moving at wall speed since that activity started. The clock therefore keeps the server
time as an offset from the wall's monotonic clock, moved forward by each activity's started
time (taken as it starts, by a worker interceptor) and by a direct read (``sync``) before the
fault is injected. Reads are then local and cheap, from any thread: the probe runs its checks
in threads of its own, outside any activity context, with a sub-second timeout each, so
neither the activity's info nor a call to the server per read would do there.

For the V1 test server (one clock for the whole server), which the rehearsal starts."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

from temporalio import activity, client, worker
from temporalio.testing import WorkflowEnvironment


class ServerClock(client.Interceptor, worker.Interceptor):
    """A ``Callable[[], datetime]`` for ``SimFleet(clock=...)``; pass it to the environment's
    client as an interceptor (its workers then use it too) and ``sync`` before reading it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zero: datetime | None = None  # the server's time when the monotonic clock read 0

    async def sync(self, env: WorkflowEnvironment) -> None:
        self.saw(await env.get_current_time())

    def saw(self, server_time: datetime) -> None:
        """The server's clock read ``server_time`` just now; it never runs backwards."""
        zero = server_time - _monotonic()
        with self._lock:
            if self._zero is None or zero > self._zero:
                self._zero = zero

    def __call__(self) -> datetime:
        if self._zero is None:
            raise RuntimeError("ServerClock read before sync(): it has not seen the server")
        return self._zero + _monotonic()

    def intercept_activity(
        self, next: worker.ActivityInboundInterceptor
    ) -> worker.ActivityInboundInterceptor:
        return _SeesActivityStarts(next, self)


class _SeesActivityStarts(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, clock: ServerClock) -> None:
        super().__init__(next)
        self._clock = clock

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        self._clock.saw(activity.info().started_time)
        return await self.next.execute_activity(input)


def _monotonic() -> timedelta:
    return timedelta(seconds=time.monotonic())
