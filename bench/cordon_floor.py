"""The detection → cordon baseline: the same burst of a workflow that does nothing but run one
activity, on the same server in the same run, the floor this server and machine allow. What is
left between it and NodeRemediation is what remedy itself costs (bench/scale_bench.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from burst import IN_FLIGHT
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


@workflow.defn(name="CordonFloor", sandboxed=False)
class CordonFloor:
    """The least a workflow can do between a report and a cordon: run one activity."""

    @workflow.signal(name="report")
    def report(self, node: str) -> None:
        """The report a signal-with-start carries; the baseline has nothing to do with it."""

    @workflow.run
    async def run(self, node: str) -> None:
        await workflow.execute_activity(
            "floor_cordon", node, start_to_close_timeout=timedelta(seconds=60)
        )


async def floor_run(client: Client, nodes: list[str], signal: bool = False) -> list[float]:
    """Each node's latency from its start to its activity. ``signal``: started as an agent's
    report starts a ladder, by signal-with-start."""
    queue = f"floor-{uuid.uuid4().hex[:6]}"
    done: dict[str, float] = {}

    @activity.defn(name="floor_cordon")
    def floor_cordon(node: str) -> None:
        done.setdefault(node, time.perf_counter())

    gate = asyncio.Semaphore(IN_FLIGHT)
    sent: dict[str, float] = {}

    async def one(node: str) -> None:
        async with gate:
            sent[node] = time.perf_counter()
            await client.start_workflow(
                CordonFloor.run,
                node,
                id=f"{queue}/{node}",
                task_queue=queue,
                **({"start_signal": "report", "start_signal_args": [node]} if signal else {}),
            )

    with ThreadPoolExecutor(max_workers=32) as executor:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[CordonFloor],
            activities=[floor_cordon],
            activity_executor=executor,
        ):
            await asyncio.gather(*(one(n) for n in nodes))
            deadline = time.perf_counter() + 600
            while len(done) < len(nodes) and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
    return [done[n] - sent[n] for n in nodes if n in done]
