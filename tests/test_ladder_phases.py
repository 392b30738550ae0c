"""The fleet scan's ladders by phase (remedy.scan.fleet.ladder_phases), which the gauges
remedy_ladders and remedy_ladder_phase_oldest_seconds show: every phase of every pool is
given, an emptied one as 0, and the oldest ladder's time in its phase."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from remedy.ladder.remediation import Phase
from remedy.scan.fleet import STARTING, LadderSeen, ladder_phases

AT = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_counts_and_the_oldest_per_pool_and_phase() -> None:
    ladders = [
        LadderSeen(pool="a", phase="settling", since=AT - timedelta(minutes=5)),
        LadderSeen(pool="a", phase="settling", since=AT - timedelta(minutes=70)),
        LadderSeen(pool="b", phase="starting", since=AT + timedelta(seconds=3)),  # clock ahead
        LadderSeen(node="n1", pool="", phase=STARTING, since=AT - timedelta(seconds=2)),
        LadderSeen(node="gone", pool="", phase=STARTING, since=AT),
    ]
    phases = ladder_phases(ladders, {"n1": "a", "n2": "c"}, AT)
    assert phases[("a", "settling")] == (2, 4200.0)
    assert phases[("b", STARTING)] == (1, 0.0)
    assert phases[("a", STARTING)] == (1, 2.0)  # no pool yet: its node's
    assert phases[("unknown", STARTING)] == (1, 0.0)  # a node the scan did not list
    assert phases[("c", "acting")] == (0, 0.0)  # a pool with none: every phase at 0
    assert {p for _, p in phases} == {STARTING, *(p.value for p in Phase if p is not Phase.DONE)}
    assert {pool for pool, _ in phases} == {"a", "b", "c", "unknown"}
