"""Does a fresh controller process clear the SDK worker's stall, and does the stall watch find it?

The controller's worker has stopped polling for good with more workflow-task slots than the
default and thousands of ladders started at once (bench/results/lease_priority.md). Here a
controller child process with ``--slots`` slots runs ``ControllerWorkers.run`` with the stall
watch (``--after`` seconds); the bench starts ``--nodes`` ladders (memory_bench's pooled fleet,
parked in their tolerance windows) and, each time the child exits with WorkerStalled (code 3),
starts a fresh one, as a Deployment would. It prints the ladders parked over time, each stall
the watch reported, and the child processes it took. Not in `make bench`: with the default 100
slots nothing stalls, and with 400 it runs until ``--limit``.

    .venv/bin/python bench/stall_restart.py [--nodes 10000] [--slots 400] [--after 60]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import memory_bench as mb
from burst import PARK, report_all

from remedy.disruption.budget import BudgetPolicy
from remedy.runbook import RunbookSet
from workers.client import connect
from workers.controller import WorkerTuning, controller_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workers.door import DoorSettings
from workers.stall_watch import EXIT_STALLED, WorkerStalled

LOOK_EVERY_S = 10.0


async def child(address: str, queue: str, nodes: int, slots: int, after_s: float) -> None:
    """A controller over the pooled fleet, watching itself; exits EXIT_STALLED on a stall."""
    client = await connect(address)
    fleet = mb.pooled_fleet(nodes, queue.removeprefix("memory-"))
    tuning = WorkerTuning(max_concurrent_workflow_tasks=slots)
    with ThreadPoolExecutor(max_workers=32) as executor:
        workers = controller_worker(
            client,
            fleet.cluster,
            executor,
            queue,
            BudgetPolicy(storm_share=1.0),
            RunbookSet([PARK]),
            tuning=tuning,
            door=DoorSettings(agents_queue=f"{queue}-agents"),
        )
        print("ready", flush=True)
        try:
            await workers.run(stall_after=timedelta(seconds=after_s))
        except WorkerStalled as stalled:
            print(f"stalled: {stalled}", flush=True)
            raise SystemExit(EXIT_STALLED) from None


def spawn(address: str, queue: str, args: argparse.Namespace) -> subprocess.Popen[str]:
    argv = [address, queue, str(args.nodes), str(args.slots), str(args.after)]
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", *argv], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError("the controller process did not start")
    return process


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        address = f"127.0.0.1:{port}"
        async with dev_server(port, _free_port(), None, Path(tmp) / "server.log") as client:
            tag = uuid.uuid4().hex[:6]
            queue = f"memory-{tag}"
            process, processes, stalls = spawn(address, queue, args), 1, []
            names = sorted(mb.pooled_fleet(args.nodes, tag).nodes)
            start = time.perf_counter()
            try:
                for pool in range(0, args.nodes, mb.POOL_NODES):
                    batch = names[pool : pool + mb.POOL_NODES]
                    await report_all(client, batch, mb.pool_of(tag, pool), queue)
                parked_query = f"TaskQueue = '{queue}' AND RemedyPhase = 'tolerating'"
                while True:
                    parked = (await client.count_workflows(parked_query)).count
                    took = time.perf_counter() - start
                    print(f"  {took:7.1f} s: {parked} of {args.nodes} parked, process {processes}")
                    if (code := process.poll()) is not None:
                        said = process.stdout.read() if process.stdout else ""
                        stalls.append(f"{took:.0f} s, exit {code}: {said.strip()}")
                        print(f"    {stalls[-1]}", flush=True)
                        process, processes = spawn(address, queue, args), processes + 1
                    if parked >= args.nodes or took > args.limit:
                        break
                    await asyncio.sleep(LOOK_EVERY_S)
            finally:
                process.terminate()
                process.wait(30)
    print(
        f"\n{args.nodes} ladders, {args.slots} slots, stall watch {args.after:g} s: {parked} "
        f"parked in {took:.0f} s; {len(stalls)} stall(s) reported, {processes} controller "
        "process(es)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        address, queue, nodes, slots, after = sys.argv[2:]
        asyncio.run(child(address, queue, int(nodes), int(slots), float(after)))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--nodes", type=int, default=10000)
        parser.add_argument("--slots", type=int, default=400)
        parser.add_argument("--after", type=float, default=60.0, help="stall watch, seconds")
        parser.add_argument("--limit", type=float, default=1200.0, help="seconds, at most")
        asyncio.run(main(parser.parse_args()))
