"""The two worker processes of a chaos run, over one fleet file: the controller (the
fleet-level workflows and the cluster-side activities) and the simulated agents (one worker
on one queue serves every simulated node's host-local activities, as in the demo). Each runs
until it is killed; the harness restarts it."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio.client import Client

from chaos.config import blocklist_policy, budget_policy, runbooks
from chaos.provider import StoredProvider, StoredSettings
from workers.client import TemporalUnreachable, connect_to
from workers.connection import plain
from workers.controller import controller_worker, node_agent_worker
from workers.door import DoorSettings

CONNECT_EVERY_S = 0.5


async def _client(address: str, name: str) -> Client:
    """The server may be down (an experiment stops it): keep trying. ``name``: what the
    histories say did each task (the worker's identity, remedy-NAME:USER@HOST)."""
    while True:
        try:
            return await connect_to(plain(address, role=name))
        except TemporalUnreachable as err:
            logging.warning("%s; trying again", err)
            await asyncio.sleep(CONNECT_EVERY_S)


def fleet_seal(fleet: Path) -> bytes:
    """The controllers' seal of one chaos run: every controller process of the run shares it
    (workers/door.py), none of another run's."""
    return hashlib.sha256(f"remedy-chaos-seal/{fleet.resolve()}".encode()).digest()


async def run_controller(
    address: str,
    fleet: Path,
    task_queue: str,
    speedup: float,
    name: str = "controller",
    agents_queue: str | None = None,
) -> None:
    client = await _client(address, name)
    with ThreadPoolExecutor(max_workers=16) as executor:
        worker = controller_worker(
            client,
            StoredProvider(StoredSettings(fleet=fleet)).controller().cluster,
            executor,
            task_queue,
            budget_policy(speedup),
            runbooks(speedup),
            blocklist=blocklist_policy(),
            door=DoorSettings(seal=fleet_seal(fleet), agents_queue=agents_queue),
        )
        await worker.run()


async def run_agents(address: str, fleet: Path, task_queue: str, name: str = "agents") -> None:
    client = await _client(address, name)
    provider = StoredProvider(StoredSettings(fleet=fleet))
    with ThreadPoolExecutor(max_workers=16) as executor:
        worker = node_agent_worker(client, provider.host_for, executor, task_queue)
        await worker.run()
