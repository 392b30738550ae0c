"""Watch the controller's own workflow workers from the server's side, and say when it has
stopped taking its tasks (remedy.scan.worker_stall): the SDK worker has been seen to stop polling
for good with nothing logged. The controller then exits non-zero, so that its supervisor
(Kubernetes, systemd) starts a fresh one: every ladder is durable, and what the stalled process
held is retried by the server as after a crash."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from remedy.scan.worker_stall import LOOK_EVERY, STALL_AFTER, QueueLook, StallJudge

log = logging.getLogger(__name__)
EXIT_STALLED = 3  # `remedy controller`'s exit code when its worker stalled
LOOK_WITHIN = timedelta(seconds=10)


class WorkerStalled(RuntimeError):
    """The worker on ``task_queue`` has stopped taking its tasks (the reason in words)."""

    def __init__(self, task_queue: str, reason: str) -> None:
        super().__init__(f"the worker on task queue {task_queue} has stalled: {reason}")
        self.task_queue = task_queue


async def look(client: Client, task_queue: str, identity: str | None = None) -> QueueLook:
    """The queue's waiting workflow tasks and the last poll of it by the worker ``identity``
    (None: by any worker)."""
    answer = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            report_stats=True,
        ),
        timeout=LOOK_WITHIN,  # a look that hangs must not stop the watch with it
    )
    ours = [p for p in answer.pollers if identity in (None, p.identity)]
    polls = [p.last_access_time.ToDatetime() for p in ours]
    return QueueLook(
        waiting=answer.stats.approximate_backlog_count,
        oldest=answer.stats.approximate_backlog_age.ToTimedelta(),
        last_poll=max(polls, default=None),
    )


async def until_stalled(
    workers: Sequence[Worker], after: timedelta = STALL_AFTER, every: timedelta | None = None
) -> WorkerStalled:
    """Look at each of ``workers``' workflow task queues every ``every`` (default
    ``LOOK_EVERY``, or a fifth of ``after`` if shorter), and return once one has stalled for
    ``after``. A look the server does not answer is skipped: an outage is the server's, not the
    worker's, and the worker waits it out. A server that keeps no record of its queues (the
    time-skipping test server) is not watched."""
    every = every or min(LOOK_EVERY, after / 5)  # five looks at least within the window
    clock = asyncio.get_running_loop().time
    judges = [(w, StallJudge(started=clock(), after=after)) for w in workers]
    while True:
        await asyncio.sleep(every.total_seconds())
        for worker, judge in judges:
            identity = worker.config().get("identity") or worker.client.identity
            try:
                seen = await look(worker.client, worker.task_queue, identity)
            except RPCError as err:
                if err.status is RPCStatusCode.UNIMPLEMENTED:  # the time-skipping test server
                    log.info("task queues cannot be watched for stalls here: %s", err)
                    await asyncio.Event().wait()
                log.warning("could not look at task queue %s: %s", worker.task_queue, err)
                continue
            if (reason := judge.judge(seen, clock())) is not None:
                return WorkerStalled(worker.task_queue, reason)
