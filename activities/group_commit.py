"""Group commit: one send in flight per destination, and what comes meanwhile goes together in
the next send. A lone item goes at once, alone; under a burst (a storm's ladders reporting to
their pool's budget) a thousand items become a few calls, each sized by how long the last one
took, with no timer to tune.

Each caller returns once a send that carried its item succeeded, or raises what that send
raised: its activity fails and is retried, and the retry's item goes in a later send. Items
must be safe to send twice (a budget counts a node's report once)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


@dataclass
class _Line(Generic[T]):
    waiting: list[tuple[T, asyncio.Future[None]]] = field(default_factory=list)
    sending: asyncio.Task[None] | None = None


class GroupCommit(Generic[K, T]):
    def __init__(self, send: Callable[[K, list[T]], Awaitable[None]], most: int) -> None:
        self._send, self._most = send, most  # ``most``: items per send at most
        self._lines: dict[K, _Line[T]] = {}

    async def put(self, key: K, item: T) -> None:
        """Send ``item`` to ``key``, with whatever else waits for it."""
        line = self._lines.setdefault(key, _Line())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.waiting.append((item, done))
        if line.sending is None:
            line.sending = asyncio.create_task(self._drain(key, line))
        try:
            await asyncio.shield(done)  # a caller cancelled leaves the others' send alone
        except asyncio.CancelledError:
            done.add_done_callback(_nobody_waits)
            raise

    async def _drain(self, key: K, line: _Line[T]) -> None:
        batch: list[tuple[T, asyncio.Future[None]]] = []
        try:
            while line.waiting:
                batch, line.waiting = line.waiting[: self._most], line.waiting[self._most :]
                failed: Exception | None = None
                try:
                    await self._send(key, [item for item, _ in batch])
                except Exception as err:  # noqa: BLE001 - each caller raises it
                    failed = err
                _settle(batch, failed)
                batch = []
        finally:
            stopped = RuntimeError("the send was cancelled: the worker is stopping")
            _settle([*batch, *line.waiting], stopped)  # cancelled: nobody waits forever
            line.waiting, line.sending = [], None
            if self._lines.get(key) is line:
                del self._lines[key]


def _settle(batch: list[tuple[T, asyncio.Future[None]]], err: Exception | None) -> None:
    for _, done in batch:
        if done.done():
            continue
        if err is None:
            done.set_result(None)
        else:
            done.set_exception(err)


def _nobody_waits(done: asyncio.Future[None]) -> None:
    if not done.cancelled():
        done.exception()  # read: its caller was cancelled, nothing is left to raise it to
