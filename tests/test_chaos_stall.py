"""When the chaos harness calls a run's ladders stuck: not while one of them climbs, however
slowly (a busy machine whose controller is killed again and again), but when none moves for the
stall period, or when they move without any ending for STALL_BOUND periods (going round)."""

from __future__ import annotations

from chaos.driver import STALL_BOUND, Stall

STALL_S = 150.0


def test_ladders_that_climb_slowly_are_not_stuck() -> None:
    stall = Stall(STALL_S, now=0.0)
    assert not stall.stalled(4, 4, 0, now=0.0)
    # 4 ladders in flight, none ends for 2.5 stall periods, but one moves every 100 s.
    for step, now in enumerate(range(100, 375, 100), start=1):
        assert not stall.stalled(4, 4, step, now=float(now))


def test_ladders_that_do_not_move_for_the_stall_period_are_stuck() -> None:
    stall = Stall(STALL_S, now=0.0)
    assert not stall.stalled(4, 4, 3, now=10.0)
    assert not stall.stalled(4, 4, 3, now=10.0 + STALL_S)
    assert stall.stalled(4, 4, 3, now=11.0 + STALL_S)


def test_a_ladder_ending_or_starting_counts_as_progress() -> None:
    stall = Stall(STALL_S, now=0.0)
    assert not stall.stalled(4, 4, 0, now=0.0)
    assert not stall.stalled(4, 3, 0, now=140.0)  # one ended
    assert not stall.stalled(5, 4, 0, now=280.0)  # the next started
    assert stall.stalled(5, 4, 0, now=431.0)


def test_ladders_that_move_without_ever_ending_go_round_and_are_stuck() -> None:
    stall = Stall(STALL_S, now=0.0)
    assert not stall.stalled(4, 4, 0, now=0.0)
    bound = STALL_BOUND * STALL_S
    moves = [(m, 60.0 * m) for m in range(1, int(bound // 60) + 1)]
    assert not any(stall.stalled(4, 4, m, now=t) for m, t in moves)
    assert stall.stalled(4, 4, len(moves) + 1, now=bound + 1.0)
