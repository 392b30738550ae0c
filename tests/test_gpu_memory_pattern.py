"""The built-in load test's memory check: a pattern written to device memory, held through the
load, read back with its complement — through plain Python lists standing in for the arrays."""

from __future__ import annotations

from adapters.host.gpu_memory import ArrayOps, PatternedMemory, verify_held


class Words:
    """Device memory as a Python list, with bits that do not hold what is written."""

    def __init__(self, size: int, stuck: dict[int, int] | None = None) -> None:
        self.cells, self.stuck = [0] * size, stuck or {}  # word → bit stuck at 1

    def ops(self) -> ArrayOps:
        def assign(buf: list[int], start: int, stop: int, values: list[int]) -> None:
            for i, v in zip(range(start, stop), values, strict=True):
                buf[i] = v | (1 << self.stuck[i]) if i in self.stuck else v

        return ArrayOps(
            arange=lambda s, e: list(range(s, e)),
            invert=lambda values: [~v for v in values],
            assign=assign,
            count_ne=lambda buf, s, e, want: sum(
                a != b for a, b in zip(buf[s:e], want, strict=True)
            ),
        )


def test_memory_pattern_is_written_held_through_the_load_and_read_back() -> None:
    clean = Words(10)
    memory = PatternedMemory(clean.cells, 10, clean.ops(), chunk=3)
    loaded: list[list[int]] = []
    result, bad = verify_held(memory, lambda: loaded.append(list(clean.cells)) or 1.5)
    assert (result, bad) == (1.5, 0)
    assert loaded == [list(range(10))]  # the pattern was in place while the load ran
    assert clean.cells == [~i for i in range(10)]  # then its complement, read back too


def test_a_stuck_bit_is_a_mismatch() -> None:
    # Word 6 holds 6 (bit 0 already 0 → stuck at 1 shows); its complement has bit 0 set.
    broken = Words(10, stuck={6: 0})
    _, bad = verify_held(PatternedMemory(broken.cells, 10, broken.ops(), chunk=4), lambda: 0.0)
    assert bad == 1
