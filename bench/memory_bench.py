"""The controller worker's memory with many nodes in remediation, per workflow-cache size, and
what a smaller cache costs: the worker runs in a child process (its RSS read from /proc), the
ladders are started and parked in their tolerance windows (counted through the search
attributes); then a query to a ladder still in the cache and to one evicted from it (which the
worker must replay from its history first) are timed.

    .venv/bin/python bench/memory_bench.py [--nodes 10000] [--caches 500 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from burst import PARK, report_all, rss_mb
from pydantic import BaseModel
from temporalio.client import Client

from adapters.sim import SimFleet
from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.disruption.budget import BudgetPolicy
from remedy.runbook import RunbookSet
from workers.client import connect
from workers.controller import WorkerTuning, controller_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workers.door import DoorSettings
from workers.tables import plain

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_RSS_MB = 300.0
PROBES = 10  # ladders queried on each side of the cache
# How long the ladders may take to park: a shared 2-core machine is slow at 10,000.
PARK_S, PARK_S_PER_NODE = 900.0, 0.1
# Nodes per pool, as in a fleet of node groups: each pool's budget (one workflow) hears its
# ladders' reports. One budget for 10,000 nodes takes far longer than the ladders to park.
POOL_NODES = 250


class MemoryRun(BaseModel):
    nodes: int
    rss_idle_mb: float
    rss_loaded_mb: float
    rss_peak_mb: float
    starts_per_s: float
    wall_s: float
    cache: int = 1000  # the worker's max_cached_workflows
    query_cached_ms: float | None = None  # median query to a ladder in the cache
    query_evicted_ms: float | None = None  # ... to one replayed from its history first


class MemoryReport(BaseModel):
    runs: list[MemoryRun]
    target_rss_mb: float = TARGET_RSS_MB


async def query_ms(client: Client, nodes: list[str]) -> float:
    """Median time to answer a state query, one ladder at a time."""
    took = []
    for node in nodes:
        start = time.perf_counter()
        await REMEDIATION_STATE.ask(client.get_workflow_handle(remediation_workflow_id(node)))
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


async def memory_run(
    client: Client, address: str, nodes: int, cache: int = WorkerTuning().max_cached_workflows
) -> MemoryRun:
    tag = uuid.uuid4().hex[:6]
    queue = f"memory-{tag}"
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", address, queue, str(nodes), str(cache)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the controller process did not start")
        idle, _ = rss_mb(child.pid)
        names = sorted(pooled_fleet(nodes, tag).nodes)
        start = time.perf_counter()
        for pool in range(0, nodes, POOL_NODES):
            await report_all(client, names[pool : pool + POOL_NODES], pool_of(tag, pool), queue)
        started = time.perf_counter() - start
        query = f"TaskQueue = '{queue}' AND RemedyPhase = 'tolerating'"
        deadline = time.perf_counter() + PARK_S + nodes * PARK_S_PER_NODE
        while (await client.count_workflows(query)).count < nodes:
            if time.perf_counter() > deadline:
                raise RuntimeError("the ladders did not all reach their tolerance windows")
            await asyncio.sleep(1)
        wall = time.perf_counter() - start
        loaded, peak = rss_mb(child.pid)
        # The last ladders parked are the most recently used; the first, the first evicted
        # (when the cache holds fewer than ``nodes``). Cached first: replaying evicts others.
        cached = await query_ms(client, names[-PROBES:])
        evicted = await query_ms(client, names[:PROBES])
    finally:
        child.terminate()
        child.wait(30)
    return MemoryRun(
        nodes=nodes,
        rss_idle_mb=idle,
        rss_loaded_mb=loaded,
        rss_peak_mb=peak,
        starts_per_s=nodes / started,
        wall_s=wall,
        cache=cache,
        query_cached_ms=cached,
        query_evicted_ms=evicted,
    )


def pool_of(tag: str, index: int) -> str:
    """The pool of the node at ``index`` (sorted by name)."""
    return f"memory-{tag}-{index // POOL_NODES}"


def pooled_fleet(nodes: int, tag: str) -> SimFleet:
    """``nodes`` simulated nodes, POOL_NODES to a pool."""
    fleet = SimFleet(nodes=nodes, gpus_per_node=1, name_prefix=f"m{tag}")
    for index, name in enumerate(sorted(fleet.nodes)):
        fleet.nodes[name].pool = pool_of(tag, index)
    return fleet


async def serve(address: str, queue: str, nodes: int, cache: int) -> None:
    """The child: a controller worker over a simulated cluster of ``nodes`` nodes."""
    client = await connect(address)
    fleet = pooled_fleet(nodes, queue.removeprefix("memory-"))
    with ThreadPoolExecutor(max_workers=32) as executor:
        async with controller_worker(
            client,
            fleet.cluster,
            executor,
            queue,
            BudgetPolicy(storm_share=1.0),
            RunbookSet([PARK]),
            tuning=WorkerTuning(max_cached_workflows=cache),
            door=DoorSettings(agents_queue=f"{queue}-agents"),
        ):
            print("ready", flush=True)
            await asyncio.Event().wait()


HEADERS = ["nodes", "cache", "RSS MB", "peak MB", "idle MB", "query cached ms", "query evicted ms"]


def rows(report: MemoryReport) -> list[list[str]]:
    return [
        [
            str(r.nodes),
            str(r.cache),
            f"{r.rss_loaded_mb:.0f}",
            f"{r.rss_peak_mb:.0f}",
            f"{r.rss_idle_mb:.0f}",
            f"{r.query_cached_ms:.0f}" if r.query_cached_ms is not None else "-",
            f"{r.query_evicted_ms:.0f}" if r.query_evicted_ms is not None else "-",
        ]
        for r in report.runs
    ]


def met(run: MemoryRun, target_mb: float = TARGET_RSS_MB) -> str:
    """The peak RSS against the target, which speaks of 10,000 nodes: met / not met."""
    verdict = "met" if run.rss_peak_mb <= target_mb else "not met"
    return verdict + ("" if run.nodes >= 10000 else f" (measured at {run.nodes}, not 10000)")


def summary(run: MemoryRun, target_mb: float = TARGET_RSS_MB) -> str:
    """One sentence for a run: RSS with its cache setting, the target, what a replay costs."""
    default = WorkerTuning().max_cached_workflows
    setting = "remedy's default" if run.cache == default else f"default {default}"
    replay = (
        f"; a query to a cached ladder {run.query_cached_ms:.0f} ms, to an evicted one "
        f"(replayed from its history first) {run.query_evicted_ms:.0f} ms"
        if run.query_cached_ms is not None and run.query_evicted_ms is not None
        else ""
    )
    return (
        f"controller worker with {run.nodes} ladders parked in their tolerance windows, "
        f"workflow cache {run.cache} ({setting}): RSS {run.rss_loaded_mb:.0f} MB, peak "
        f"{run.rss_peak_mb:.0f} MB (idle {run.rss_idle_mb:.0f} MB); target ≤ {target_mb:g} MB "
        f"at 10000 nodes: {met(run, target_mb)}{replay}; "
        f"{run.starts_per_s:.0f} remediations started/s"
    )


async def main(nodes: list[int], caches: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        async with dev_server(port, _free_port(), None, Path(tmp) / "memory.log") as client:
            runs = []
            for count in nodes:
                for cache in caches:
                    runs.append(await memory_run(client, f"127.0.0.1:{port}", count, cache))
                    print(f"  {count} nodes, cache {cache}: peak {runs[-1].rss_peak_mb:.0f} MB")
    report = MemoryReport(runs=runs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory.json").write_text(report.model_dump_json(indent=2))
    lines = [summary(r, report.target_rss_mb) for r in report.runs]
    print("\n".join(["", *plain(HEADERS, rows(report)), "", *lines]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        _, _, address, queue, count, cache = sys.argv
        asyncio.run(serve(address, queue, int(count), int(cache)))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--nodes", type=int, nargs="+", default=[10000])
        parser.add_argument(
            "--caches",
            type=int,
            nargs="+",
            default=[WorkerTuning().max_cached_workflows, 1000],
            help="workflow cache sizes (default: remedy's, then the SDK's)",
        )
        args = parser.parse_args()
        asyncio.run(main(args.nodes, args.caches))
