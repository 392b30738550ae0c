"""Group commit (activities/group_commit.py): a lone item goes at once and alone; items that
come while a send is on the wire go together in the next, at most ``most`` a send; a failed
send fails each of its callers and no other; a caller cancelled leaves the send alone."""

from __future__ import annotations

import asyncio

import pytest

from activities.group_commit import GroupCommit


class Wire:
    """A destination whose sends wait until let through, and that remembers them."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[int]]] = []
        self.gate = asyncio.Event()
        self.fail: set[int] = set()

    async def send(self, key: str, items: list[int]) -> None:
        self.sent.append((key, items))
        await self.gate.wait()
        if self.fail & set(items):
            raise ConnectionError(f"lost {sorted(self.fail & set(items))}")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_lone_item_goes_at_once_and_alone() -> None:
    wire = Wire()
    wire.gate.set()
    commit = GroupCommit(wire.send, most=10)
    await commit.put("pool-a", 1)
    assert wire.sent == [("pool-a", [1])]


async def test_what_comes_while_a_send_is_on_the_wire_goes_together_next() -> None:
    wire = Wire()
    commit = GroupCommit(wire.send, most=3)
    first = asyncio.create_task(commit.put("pool-a", 0))
    await settle()
    later = [asyncio.create_task(commit.put("pool-a", i)) for i in range(1, 6)]
    other = asyncio.create_task(commit.put("pool-b", 9))  # another destination: its own line
    await settle()
    assert wire.sent == [("pool-a", [0]), ("pool-b", [9])]  # the rest wait for the first
    wire.gate.set()
    await asyncio.gather(first, *later, other)
    assert wire.sent[2:] == [("pool-a", [1, 2, 3]), ("pool-a", [4, 5])]  # at most 3 a send


async def test_a_failed_send_fails_its_callers_only() -> None:
    wire = Wire()
    wire.fail = {2}
    commit = GroupCommit(wire.send, most=2)
    first = asyncio.create_task(commit.put("pool-a", 0))
    await settle()
    batch = [asyncio.create_task(commit.put("pool-a", i)) for i in (1, 2, 3)]
    await settle()
    wire.gate.set()
    results = await asyncio.gather(first, *batch, return_exceptions=True)
    assert results[0] is None and results[3] is None  # [0] alone, then [3] after [1, 2]
    assert [type(r) for r in results[1:3]] == [ConnectionError, ConnectionError]
    assert [items for _, items in wire.sent] == [[0], [1, 2], [3]]
    await commit.put("pool-a", 4)  # the line goes on
    assert wire.sent[-1] == ("pool-a", [4])


async def test_a_cancelled_caller_leaves_the_send_to_the_others() -> None:
    wire = Wire()
    commit = GroupCommit(wire.send, most=10)
    first = asyncio.create_task(commit.put("pool-a", 0))
    await settle()
    gone, stays = (asyncio.create_task(commit.put("pool-a", i)) for i in (1, 2))
    await settle()
    gone.cancel()
    wire.gate.set()
    await asyncio.gather(first, stays)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert [items for _, items in wire.sent] == [[0], [1, 2]]  # sent all the same


async def test_a_send_cancelled_with_the_worker_fails_every_caller_left() -> None:
    wire = Wire()
    commit = GroupCommit(wire.send, most=10)
    first = asyncio.create_task(commit.put("pool-a", 0))
    await settle()
    waiting = asyncio.create_task(commit.put("pool-a", 1))
    await settle()
    [sending] = [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "_drain"]
    sending.cancel()  # the worker stops with the send on the wire
    results = await asyncio.gather(first, waiting, return_exceptions=True)
    assert [str(r) for r in results] == ["the send was cancelled: the worker is stopping"] * 2
