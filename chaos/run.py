"""A chaos run: each experiment in its own stage (dev server, fleet file, pool, queues,
controller and agents), ``at_once`` of them side by side, one row each. Every process started
is stopped when the run ends, however it ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

from temporalio.service import RPCError

from chaos.config import Size
from chaos.disturb import VISIBILITY_S, quiet, server_up
from chaos.driver import Driver
from chaos.experiments import Experiment
from chaos.measure import Row, measure
from chaos.processes import Processes
from chaos.stage import Stage, stage

log = logging.getLogger(__name__)


async def run(
    experiments: list[Experiment], size: Size, seed: int, workdir: Path, at_once: int = 1
) -> list[Row]:
    """``at_once``: experiments run side by side (each has its own processes)."""
    workdir.mkdir(parents=True, exist_ok=True)
    slots = asyncio.Semaphore(at_once)

    async def one(exp: Experiment) -> Row:
        async with slots:
            started = time.monotonic()
            async with stage(exp.key, procs, workdir, size, exp.knobs, seed) as st:
                row = await run_experiment(exp, st)
            row.wall_s = time.monotonic() - started
            log.warning("%s", _progress(row))
            return row

    with Processes(workdir / "logs") as procs:
        async with asyncio.TaskGroup() as group:  # one failing cancels the others
            tasks = [group.create_task(one(exp)) for exp in experiments]
        return [task.result() for task in tasks]


async def run_experiment(exp: Experiment, st: Stage) -> Row:
    size = st.size
    seen: Counter[str] = Counter()
    driver = Driver(st, exp.faults, copies=exp.reports(size))
    chaos: asyncio.Task[None] | None = None
    if exp.disturb is not None:
        chaos = asyncio.create_task(exp.disturb(st, driver, seen))
    try:
        settled = await driver.run(size.ladders, exp.in_flight(size, st.cap), size.settle_s)
        while chaos is not None and exp.finite and not chaos.done():
            await driver.tick(0, 0)
            await asyncio.sleep(0.5)
    finally:
        if chaos is not None:
            chaos.cancel()
            with suppress(asyncio.CancelledError):
                await chaos
    await _heal(st)
    if settled:
        settled = await driver.run(0, 0, size.settle_s)  # what ran on past the disturbance
    if exp.after is not None:
        await exp.after(st, driver, seen)
    await quiet(st, size.settle_s if settled else VISIBILITY_S)
    row = await measure(st, exp.title, len(driver.injected))
    tally = st.store.read().tally
    row.events = seen + Counter(tally.model_dump())
    row.notes = _notes(st, driver, seen) + tally.lines()
    await _end_stuck(st, row)
    return row


async def _heal(st: Stage) -> None:
    """Nothing goes wrong any more: knobs calm, every process up."""
    with st.store.transaction() as world:
        world.knobs = world.knobs.calm()
    await server_up(st.server, st.client)


async def _end_stuck(st: Stage, row: Row) -> None:
    """Measured: now terminate what is stuck, so nothing of the experiment runs on."""
    for run_id in row.stuck:
        workflow_id, _, run = run_id.rpartition("/")
        with suppress(RPCError):
            await st.client.get_workflow_handle(workflow_id, run_id=run).terminate(
                "chaos harness: stuck past the deadline (counted)"
            )


def _notes(st: Stage, driver: Driver, seen: Counter[str]) -> list[str]:
    notes = [f"{n} {what}" for what, n in sorted(seen.items())]
    restarts = {
        "controller": st.controller.starts - 1,
        "agents": st.agents.starts - 1,
    }
    notes += [f"{who} restarted {n}x" for who, n in restarts.items() if n]
    if driver.approved:
        notes.append(f"{len(driver.approved)} rungs approved")
    if driver.handed_back:
        notes.append(f"{driver.handed_back} nodes taken back by a person")
    return notes


def _progress(row: Row) -> str:
    return (
        f"({row.key}) {row.ladders} ladders, {len(row.doubled)} doubled, {len(row.lost)} lost, "
        f"{len(row.stuck)} stuck, {len(row.orphaned)} orphaned, peak {row.peak}/{row.cap} "
        f"in {row.wall_s:.0f} s"
    )
