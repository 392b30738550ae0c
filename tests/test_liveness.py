"""Liveness on the controller's clock (remedy.scan.liveness): scans a minute apart over agents that
heartbeat every five minutes on their own, skewed, clocks. The scan compared the agent's
``lastHeartbeatTime`` (the node's clock) with its own: a node twenty minutes behind was silent
at once and its fault stale, and one ahead hid a dead agent for twenty minutes more."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

import remedy.detection.conditions
import remedy.scan.liveness
from remedy.detection.node_facts import NodeFacts
from remedy.scan.fleet import NodeStatus, OpenWork, judge_liveness, status_of, summarise
from remedy.scan.liveness import AGENT_HEARTBEAT, SILENT_AFTER, SKEW_TOLERANCE, Sightings, observe
from tests.test_agent_writes import _problem

START = datetime(2026, 11, 1, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
CLOCKS = [timedelta(minutes=-20), timedelta(0), timedelta(minutes=20)]


@dataclass(frozen=True)
class Agent:
    """A node's agent: it writes its conditions every heartbeat, half a minute out of step
    with the scans, on its node's clock (``offset`` from the controller's), until it dies."""

    name: str
    offset: timedelta
    problem: bool = False
    dies_at: datetime | None = None

    def wrote(self, now: datetime) -> datetime:
        """When (the controller's time) it last wrote, as of ``now``."""
        phase = START + MINUTE / 2
        until = min(now, self.dies_at) if self.dies_at else now
        return phase + ((until - phase) // AGENT_HEARTBEAT) * AGENT_HEARTBEAT

    def facts(self, now: datetime) -> NodeFacts:
        beat = self.wrote(now) + self.offset
        problems = [_problem(beat)] if self.problem else []
        return NodeFacts(name=self.name, pool="a", problems=problems, last_heartbeat=beat)


def scans(agents: list[Agent], minutes: int) -> Iterator[tuple[datetime, list[NodeFacts]]]:
    """A scan a minute, each handed what the one before saw, as the schedule does."""
    seen = Sightings()
    for minute in range(minutes + 1):
        now = START + minute * MINUTE
        nodes, seen = judge_liveness([a.facts(now) for a in agents], seen, now, now)
        yield now, nodes


def _named(offset: timedelta) -> str:
    return f"{int(offset / MINUTE):+d}m"


def test_a_skewed_clock_is_neither_silent_nor_stale_while_its_agent_heartbeats() -> None:
    agents = [Agent(_named(o), o) for o in CLOCKS] + [
        Agent(f"sick{_named(o)}", o, problem=True) for o in CLOCKS
    ]
    for now, nodes in scans(agents, minutes=60):
        statuses = {n.name: status_of(n, OpenWork()) for n in nodes}
        assert statuses == {
            **{_named(o): NodeStatus.HEALTHY for o in CLOCKS},
            # its fault is current: the ladder it needs, not an AgentSilent one
            **{f"sick{_named(o)}": NodeStatus.UNHEALTHY for o in CLOCKS},
        }, now


@pytest.mark.parametrize("offset", CLOCKS, ids=_named)
def test_a_dead_agent_is_seen_within_the_silent_window_whatever_its_clock(
    offset: timedelta,
) -> None:
    dead = Agent("dead", offset, problem=True, dies_at=START + 30 * MINUTE)
    silent = [
        now
        for now, [node] in scans([dead], minutes=90)
        if status_of(node, OpenWork()) is NodeStatus.SILENT
    ]
    last_word = dead.wrote(dead.dies_at or START)
    # Its last heartbeat is first seen at the next scan; silent once that is SILENT_AFTER old.
    assert SILENT_AFTER < silent[0] - last_word <= SILENT_AFTER + 2 * MINUTE
    assert silent == [silent[0] + i * MINUTE for i in range(len(silent))]  # and stays so


def test_a_first_scan_starts_every_clock_and_calls_no_one_silent() -> None:
    """A restarted controller (or a recreated schedule) carries nothing: heartbeats that look
    hours old by the nodes' clocks may be fresh by ours. Their clocks start now."""
    hours_ago = START - timedelta(hours=3)
    nodes = [NodeFacts(name=f"n{i}", pool="a", last_heartbeat=hours_ago) for i in range(20)]
    unreadable = Sightings(since=START - MINUTE, packed="eJyrVspTsoo2jK0FAA2SAs4=")  # {"n":[1]}
    for carried in (Sightings(), unreadable):
        judged, seen = judge_liveness(nodes, carried, START, START)
        assert {status_of(n, OpenWork()) for n in judged} == {NodeStatus.HEALTHY}
    later = START + SILENT_AFTER + MINUTE  # none of them heartbeat since: all silent now
    judged, _ = judge_liveness(nodes, seen, later, later)
    assert {status_of(n, OpenWork()) for n in judged} == {NodeStatus.SILENT}


def test_a_nodes_clock_skew_is_reported_once_a_heartbeat_is_seen_to_change() -> None:
    agents = [Agent(_named(o), o) for o in CLOCKS]
    history = list(scans(agents, minutes=10))
    first = {n.name: n.clock_skew for n in history[0][1]}
    assert first == dict.fromkeys(first)  # one value seen: when it was written is unknown
    now, nodes = history[-1]
    skews = {n.name: n.clock_skew for n in nodes}
    for offset in CLOCKS:  # bounded by the minute between the scans
        skew = skews[_named(offset)]
        assert skew is not None and abs(skew - offset) <= MINUTE
    [pool] = summarise(nodes, OpenWork(), now).pools
    assert set(pool.clock_skew) == {"-20m", "+20m"} and pool.skewed == 2
    assert abs(pool.largest_skew_s) >= 19 * 60
    text = summarise(nodes, OpenWork(), now).markdown()
    assert "clocks off the controller's by more than 1m" in text
    assert "-20m -19m30s" in text and "+20m +19m30s" in text
    assert SKEW_TOLERANCE == MINUTE


def test_the_heartbeats_carried_from_scan_to_scan_stay_small_at_10000_nodes() -> None:
    names = [f"ip-10-0-{i // 256}-{i % 256}.us-west-2.compute.internal" for i in range(10_000)]
    beats = {name: START - timedelta(seconds=i % 300) for i, name in enumerate(names)}
    seen, _ = observe(beats, Sightings(), START, START)
    later = START + MINUTE
    again, judged = observe(
        beats, Sightings.model_validate_json(seen.model_dump_json()), later, later
    )
    assert len(again.model_dump_json()) < 200_000  # Temporal refuses a payload over 2 MB
    assert again.unpacked() == seen.unpacked() and len(judged) == 10_000


def test_the_worked_examples() -> None:
    assert doctest.testmod(remedy.scan.liveness).failed == 0
    assert doctest.testmod(remedy.detection.conditions).failed == 0
