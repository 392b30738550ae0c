"""The load test's memory check: write a pattern over the memory it holds, keep it through the
load, read it back. Allocating memory proves nothing about it; a bit that does not hold what was
written is the fault a job would hit as silent corruption or a crash.

Each 64-bit word holds its own index (a stuck or crossed address line shows as a word that
holds another's index), then its complement (every bit is read back both as 0 and as 1). The
work goes in chunks so the temporary "expected" array stays small beside the buffer under test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CHUNK_WORDS = 1 << 25  # 32 Mi words: 256 MiB of expected pattern at a time


@dataclass(frozen=True)
class ArrayOps:
    """The few array operations the check needs, from torch or cupy (or a fake in tests)."""

    arange: Callable[[int, int], Any]  # int64 words start..stop-1, on the device
    invert: Callable[[Any], Any]  # bitwise complement
    assign: Callable[[Any, int, int, Any], None]  # buffer[start:stop] = values
    count_ne: Callable[[Any, int, int, Any], int]  # how many of buffer[start:stop] differ


class PatternedMemory:
    def __init__(self, buffer: Any, words: int, ops: ArrayOps, chunk: int = CHUNK_WORDS):
        self._buffer, self.words, self._ops, self._chunk = buffer, words, ops, chunk

    def _expected(self, start: int, stop: int, inverted: bool) -> Any:
        values = self._ops.arange(start, stop)
        return self._ops.invert(values) if inverted else values

    def _spans(self) -> list[tuple[int, int]]:
        return [(s, min(s + self._chunk, self.words)) for s in range(0, self.words, self._chunk)]

    def write(self, inverted: bool = False) -> None:
        for start, stop in self._spans():
            self._ops.assign(self._buffer, start, stop, self._expected(start, stop, inverted))

    def mismatches(self, inverted: bool = False) -> int:
        return sum(
            self._ops.count_ne(self._buffer, start, stop, self._expected(start, stop, inverted))
            for start, stop in self._spans()
        )


def verify_held(memory: PatternedMemory, load: Callable[[], float]) -> tuple[float, int]:
    """Write the pattern, run ``load`` while it is held (heat and power are when weak cells
    flip), read it back; then the complement, written and read back. Returns the load's
    result and how many words came back wrong."""
    memory.write()
    result = load()
    bad = memory.mismatches()
    memory.write(inverted=True)
    return result, bad + memory.mismatches(inverted=True)
