"""One experiment's world: its own dev server (on an SQLite file), fleet file, pool, node names
and task queues, and its controller and agents processes, kept running by a supervisor that
starts a process that died again after 1–4 s."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from chaos.config import MAX_DISRUPTION, Size, runbooks
from chaos.knobs import Knobs
from chaos.processes import Proc, Processes
from chaos.provider import fleet_for
from chaos.store import FleetStore
from remedy.disruption.budget import allowed_disruptions
from remedy.runbook import RunbookSet
from workers.client import TemporalUnreachable, connect
from workers.providers.sim import SimSettings

RESTART_AFTER_S = (1.0, 4.0)
SERVER_START_S = 60.0
SERVER_TRIES = 3
WATCH_EVERY_S = 0.2


@dataclass
class Stage:
    key: str
    client: Client
    store: FleetStore
    pool: str
    prefix: str  # node names: PREFIX-000, ...
    controller_queue: str
    agents_queue: str
    runbooks: RunbookSet
    size: Size
    rng: random.Random
    server: Proc
    controller: Proc
    agents: Proc

    @property
    def cap(self) -> int:
        return allowed_disruptions(MAX_DISRUPTION, self.size.nodes)

    @property
    def ladder_prefix(self) -> str:
        return f"node-remediation/{self.prefix}-"

    async def restart_later(self, proc: Proc) -> None:
        await asyncio.sleep(self.rng.uniform(*RESTART_AFTER_S))
        proc.start()


@asynccontextmanager
async def stage(
    key: str, procs: Processes, workdir: Path, size: Size, knobs: Knobs, seed: int
) -> AsyncIterator[Stage]:
    """The experiment's own dev server (an experiment may stop it), fleet file and workers;
    all stopped when the block ends."""
    db = workdir / f"temporal-{key}.db"
    db.unlink(missing_ok=True)  # a reused workdir's histories are another run's (other code)
    server, client = await _start_server(procs, f"{key}-dev-server", db)
    address = server.address
    pool, prefix = f"chaos-{key}", f"{key}-node"
    store = FleetStore(workdir / f"fleet-{key}.json")
    fleet = fleet_for(
        SimSettings(nodes=size.nodes, pool=pool, name_prefix=prefix, speedup=size.speedup)
    )
    store.create(fleet, knobs.model_copy(update={"seed": seed}))
    controller_queue, agents_queue = f"chaos-{key}-controller", f"chaos-{key}-agents"
    common = ["--address", address, "--fleet", str(store.path)]
    controller = procs.role(
        f"{key}-controller",
        "controller",
        *common,
        "--task-queue",
        controller_queue,
        "--agents-queue",
        agents_queue,
        "--speedup",
        str(size.speedup),
    )
    agents = procs.role(f"{key}-agents", "agents", *common, "--task-queue", agents_queue)
    supervisor: asyncio.Task[None] | None = None
    try:
        st = Stage(
            key=key,
            client=client,
            store=store,
            pool=pool,
            prefix=prefix,
            controller_queue=controller_queue,
            agents_queue=agents_queue,
            runbooks=runbooks(size.speedup),
            size=size,
            rng=random.Random(f"{seed}/{key}"),
            server=server,
            controller=controller,
            agents=agents,
        )
        controller.start()
        agents.start()
        supervisor = asyncio.create_task(_supervise(st))
        yield st
    finally:
        if supervisor is not None:
            supervisor.cancel()
            with suppress(asyncio.CancelledError):
                await supervisor
        for proc in (controller, agents, server):
            await asyncio.to_thread(proc.stop)


async def _supervise(st: Stage) -> None:
    """Restart the controller or the agents after 1–4 s when one dies (killed by an
    experiment, or by itself after an effect)."""
    restarting: dict[str, asyncio.Task[None]] = {}
    try:
        while True:
            for proc in (st.controller, st.agents):
                pending = restarting.get(proc.name)
                if proc.alive() or (pending and not pending.done()):
                    continue
                restarting[proc.name] = asyncio.create_task(st.restart_later(proc))
            await asyncio.sleep(WATCH_EVERY_S)
    finally:
        for task in restarting.values():
            task.cancel()


_STARTING = asyncio.Lock()


async def _start_server(procs: Processes, name: str, db: Path) -> tuple[Proc, Client]:
    """One dev server at a time: each picks free ports for its own services at start, and two
    starting together can pick the same one (then the loser exits and is started again on
    another port)."""
    async with _STARTING:
        for attempt in range(SERVER_TRIES):
            server = procs.dev_server(name, _free_port(), db)
            server.start()
            try:
                return server, await _connect(server)
            except ServerExited:
                if attempt == SERVER_TRIES - 1:
                    raise
    raise AssertionError("unreachable")


class ServerExited(RuntimeError):
    pass


async def _connect(server: Proc) -> Client:
    loop = asyncio.get_running_loop()
    end = loop.time() + SERVER_START_S
    while True:
        if not server.alive():
            raise ServerExited(f"the dev server exited; see {server.log}")
        try:
            return await connect(server.address)
        except TemporalUnreachable:
            if loop.time() > end:
                raise
            await asyncio.sleep(0.2)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
