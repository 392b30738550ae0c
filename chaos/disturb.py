"""What goes wrong in each experiment while the ladders climb: processes killed, the dev
server stopped, the disruption budget terminated, the same report sent again and again. Each
runs until it is cancelled (or has done its count) and leaves everything running when it
ends, however it ends."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from chaos.driver import Driver, Injected
from chaos.measure import ladders
from chaos.processes import Proc
from chaos.stage import Stage
from contract.messages import BUDGET_STATE
from contract.names import budget_workflow_id, remediation_workflow_id
from contract.search_attributes import LEASE, RUNG
from remedy.disruption.budget import BudgetState

log = logging.getLogger(__name__)
Disturb = Callable[[Stage, Driver, Counter[str]], Coroutine[Any, Any, None]]
POLL_S = 0.1
RESTART_TRIES = 5
VISIBILITY_S = 3.0  # what visibility may lag behind the last close


def _keyed(st: Stage) -> int:
    return sum(1 for _, _, key in st.store.read().fleet.effects if key)


async def next_effect(st: Stage, timeout_s: float) -> bool:
    """Wait until a disruptive action's effect lands (mid-ladder, right after the action and
    before its answer); False when none came within ``timeout_s``."""
    start = _keyed(st)
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while loop.time() < end:
        await asyncio.sleep(POLL_S)
        if _keyed(st) > start:
            return True
    return False


async def kill_workers(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(a) SIGKILL the controller, the agents or both, mostly right after an effect landed;
    the stage's supervisor starts them again after 1–4 s."""
    while True:
        if st.rng.random() < 0.7:
            await next_effect(st, timeout_s=10.0)
        else:
            await asyncio.sleep(st.rng.uniform(0.5, 3.0))
        victims = st.rng.choice([[st.controller], [st.agents], [st.controller, st.agents]])
        for proc in victims:
            proc.kill()
            seen[f"{proc.name.split('-', 1)[1]} killed"] += 1
        while not all(p.alive() for p in (st.controller, st.agents)):
            await asyncio.sleep(POLL_S)
        await asyncio.sleep(st.rng.uniform(*st.size.kill_gap_s))


async def stop_server(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(c) SIGKILL the dev server right after an effect landed, keep it down for longer than
    the SDK retries a finished activity's answer, start it again on the same SQLite file."""
    try:
        for n in range(st.size.outages):
            if n:
                await asyncio.sleep(st.rng.uniform(5.0, 15.0))
            await next_effect(st, timeout_s=30.0)
            st.server.kill()
            down = st.rng.uniform(*st.size.outage_s)
            seen["server outages"] += 1
            seen["server down s"] += round(down)
            await asyncio.sleep(down)
            await server_up(st.server, st.client)
    finally:
        if not st.server.alive():
            st.server.start()


async def server_up(server: Proc, client: Client) -> None:
    """Start the dev server if it is down and wait until it answers. It comes back on the
    same port, which something else may hold for a moment: a start that exits is tried
    again."""
    for _ in range(RESTART_TRIES):
        server.start()
        while server.alive():
            try:
                await client.workflow_service.get_system_info(GetSystemInfoRequest())
                return
            except RPCError:
                await asyncio.sleep(0.5)
        await asyncio.sleep(1.0)
    raise RuntimeError(f"the dev server does not come back; see {server.log}")


async def api_down(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(f) The cluster API answers nothing for ``api_down_s`` (every cluster call raises a
    transient error), once or more, with ladders under way."""
    try:
        for n in range(st.size.api_outages):
            await (asyncio.sleep(st.rng.uniform(10.0, 20.0)) if n else next_effect(st, 30.0))
            until = datetime.now(UTC) + timedelta(seconds=st.size.api_down_s)
            with st.store.transaction() as world:
                world.knobs.api_down_until = until
            seen["API outages"] += 1
            await asyncio.sleep(st.size.api_down_s)
    finally:
        with st.store.transaction() as world:
            world.knobs.api_down_until = None


async def terminate_budget(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(g) Terminate the pool's DisruptionBudget while it holds leases (``budget_at_rest``:
    only while every lease is held and known, and nobody waits)."""
    handle = st.client.get_workflow_handle(budget_workflow_id(st.pool))
    while True:
        await asyncio.sleep(0.2)
        try:
            state = await BUDGET_STATE.ask(handle)
            if not state.holders or (st.size.budget_at_rest and not await _at_rest(st, state)):
                continue
            await handle.terminate("chaos: the budget is lost while leases are held")
        except RPCError as err:
            log.info("budget: %s", err)
            continue
        seen["budget terminated"] += 1
        seen["holding then"] += len(state.holders)
        seen["waiting then"] += len(state.waiting)
        await asyncio.sleep(st.rng.uniform(*st.size.budget_gap_s))


async def _at_rest(st: Stage, state: BudgetState) -> bool:
    if state.waiting or state.in_use < st.cap:  # holds for a human count too
        return False
    for lease in state.holders:
        desc = await st.client.get_workflow_handle(lease.holder).describe()
        if desc.typed_search_attributes.get(LEASE) != "held":
            return False
    return True


async def duplicate_reports(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(h) During the ladders: the report of a busy node again, many copies at once. Without
    ``Size.racy_duplicates`` only while the ladder is on its first rung, so that none can
    arrive as the ladder completes (a report then starts a new ladder: see chaos.md)."""
    while True:
        await asyncio.sleep(st.rng.uniform(0.2, 0.8))
        running = [i for i in driver.busy.values() if i.reported]
        if not running:
            continue
        injected = st.rng.choice(running)
        with suppress(RPCError):
            if not st.size.racy_duplicates and not await _on_first_rung(st, injected):
                continue
            await driver.send(injected, st.size.reports)
            seen["duplicate reports"] += st.size.reports


async def _on_first_rung(st: Stage, injected: Injected) -> bool:
    desc = await st.client.get_workflow_handle(remediation_workflow_id(injected.node)).describe()
    first = injected.report.runbook.ladder[0].action.value
    running = desc.status is WorkflowExecutionStatus.RUNNING
    return running and desc.typed_search_attributes.get(RUNG) == first


async def stale_reports(st: Stage, driver: Driver, seen: Counter[str]) -> None:
    """(h) After every ladder ended, each fault's report again, many copies at once: first
    those of each node's last ladder, then those of the ladders before it (a report retried
    or delivered late enough that the node had another ladder since). The ladders each
    starts are counted apart."""
    last = {i.node: i for i in driver.injected}
    older = [i for i in driver.injected if last[i.node] is not i]
    for what, sent in (("the last ladder", list(last.values())), ("older ladders", older)):
        before = len(await ladders(st.client, st.ladder_prefix))
        await asyncio.gather(*(driver.send(i, st.size.reports) for i in sent))
        seen["duplicate reports"] += st.size.reports * len(sent)
        await quiet(st, st.size.settle_s)
        started = len(await ladders(st.client, st.ladder_prefix)) - before
        seen[f"ladders from stale reports of {what}"] += started


async def quiet(st: Stage, deadline_s: float) -> None:
    """Until visibility shows no ladder of the experiment running (a stale report may have
    started one), at most ``deadline_s``; at least long enough for visibility to catch up."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    await asyncio.sleep(VISIBILITY_S)
    while loop.time() < end:
        runs = await ladders(st.client, st.ladder_prefix)
        if all(w.status is not WorkflowExecutionStatus.RUNNING for w in runs):
            return
        await asyncio.sleep(1.0)
