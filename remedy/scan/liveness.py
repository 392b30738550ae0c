"""An agent's liveness, as the fleet scan judges it: the heartbeat is the ``lastHeartbeatTime``
the agent writes on remedy's node conditions (``remedy.detection.conditions``).

The agent writes its conditions when they change, and otherwise once per ``AGENT_HEARTBEAT``
(node-problem-detector's way: five minutes), so a quiet fleet of 10,000 nodes costs about 33
writes a second, not one per node per probe (``publish_due``).

Why the conditions and not a Lease per node like the kubelet's: the agent writes them anyway,
and the scan already lists every node in one call, so liveness costs no extra write, no extra
list, and no new permission (a Lease needs coordination.k8s.io RBAC for every agent and a
second list per scan).

The heartbeat is judged on the controller's clock, never the node's (the way Kubernetes' node
lifecycle controller judges the kubelet's): a node's clock may be minutes off, and the agent's
``lastHeartbeatTime`` is that clock's. The scan keeps, from one run to the next, each node's
heartbeat value and the workflow time it first saw that value (``Sightings``, carried in the
scan's result); the value is only compared for change. A heartbeat unchanged for longer than
``silent_after`` (``SILENT_HEARTBEATS`` heartbeats by default, never fewer than
``MIN_SILENT_HEARTBEATS``: one late write must not read as a dead agent) makes the node SILENT:
the scan starts an ``AgentSilent`` ladder. A node seen for the first time (a new node, or a
scan with nothing carried: the first, or one after the schedule was recreated) starts its clock
then: a restarted controller never calls the whole fleet silent at once. A node that never
heartbeat is UNKNOWN: never healthy for lack of information, but no ladder either (the agent
may not run there: a CPU node). A problem condition is as old as its heartbeat: one older
than ``silent_after`` is not a current fault (``remedy.scan.fleet.current_problems``, which measures
the problem's age on the node's own clock and the time since on the controller's).

How far a node's clock is off is reported (``clock_skew``), not trusted: a value first seen
to change in a scan was written between the scan before and this one, which bounds it.
"""

from __future__ import annotations

import base64
import json
import zlib
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from remedy.core.models import Finding, Severity
from remedy.detection.conditions import NodeCondition, said

AGENT_SILENT = "AgentSilent"
AGENT_HEARTBEAT = timedelta(minutes=5)  # unchanged conditions are rewritten this often
SILENT_HEARTBEATS = 3
MIN_SILENT_HEARTBEATS = 2
SILENT_AFTER = SILENT_HEARTBEATS * AGENT_HEARTBEAT  # a heartbeat older than this: silent
# A clock this near the controller's is not reported: the bound on a skew is as wide as the
# time between two scans (a minute by default), and a few seconds of listing slip in too.
SKEW_TOLERANCE = timedelta(minutes=1)


def publish_due(
    conditions: list[NodeCondition],
    on_node: list[NodeCondition],
    now: datetime,
    heartbeat: timedelta = AGENT_HEARTBEAT,
) -> bool:
    """Whether the agent must write ``conditions``: one of them differs from what the node
    carries (status, reason or message; a missing one differs), or the oldest heartbeat among
    them on the node is ``heartbeat`` old. Only the types being written count: a condition the
    agent no longer publishes (NICs no longer checked) does not make every round a write.

    >>> from datetime import UTC
    >>> t0 = datetime(2026, 11, 1, tzinfo=UTC)
    >>> ok = NodeCondition(type="GpuProblem", status="False", reason="NoGpuProblem",
    ...     message="all checks passed", last_heartbeat_time=t0, last_transition_time=t0)
    >>> publish_due([ok], [ok], t0 + timedelta(minutes=4))
    False
    >>> publish_due([ok], [ok], t0 + timedelta(minutes=5))
    True
    >>> publish_due([ok.model_copy(update={"status": "True"})], [ok], t0)
    True
    """
    written = {c.type: c for c in on_node}
    for condition in conditions:
        old = written.get(condition.type)
        if old is None or said(old) != said(condition):
            return True
        if now - old.last_heartbeat_time >= heartbeat:
            return True
    return False


def silent_after_problem(silent_after: timedelta, heartbeat: timedelta) -> str | None:
    """Why ``silent_after`` is too short for agents heartbeating every ``heartbeat`` (None:
    it is not): fewer than ``MIN_SILENT_HEARTBEATS`` heartbeats would call a healthy agent
    whose one write was late silent, and cordon its node."""
    if silent_after < MIN_SILENT_HEARTBEATS * heartbeat:
        return (
            f"{silent_after.total_seconds():g}s is shorter than {MIN_SILENT_HEARTBEATS} agent "
            f"heartbeats ({heartbeat.total_seconds():g}s each): healthy agents would read as "
            f"silent"
        )
    return None


class Sighting(NamedTuple):
    """One node's heartbeat as the scans saw it (epoch seconds: a row of ``Sightings``)."""

    beat: float  # its value: the node's clock
    seen: float  # when a scan first saw that value: workflow time
    # How long before ``seen`` the value may have been written (since the scan before it
    # began listing); None: the first value seen of the node, written at any time before.
    window: float | None


class Sightings(BaseModel):
    """What the scans saw of every agent's heartbeat, carried from one scan to the next in
    its result. Packed (JSON, zlib, base64): 10,000 nodes with a cloud's long names take
    about 70 KB of the result rather than 800, far from Temporal's 2 MB limit on a payload."""

    model_config = ConfigDict(frozen=True)

    since: datetime | None = None  # when the scan that saw them began listing the nodes
    packed: str = ""

    @classmethod
    def of(cls, since: datetime, seen: dict[str, Sighting]) -> Sightings:
        text = json.dumps(seen, separators=(",", ":"))
        return cls(since=since, packed=base64.b64encode(zlib.compress(text.encode())).decode())

    def unpacked(self) -> dict[str, Sighting]:
        """What was seen; nothing if it cannot be read (every clock starts again: a scan
        that failed on it would stop every scan after it)."""
        try:
            rows = json.loads(zlib.decompress(base64.b64decode(self.packed)))
            return {node: Sighting(*row) for node, row in rows.items()}
        except (ValueError, TypeError, AttributeError, zlib.error):
            return {}


class Judged(NamedTuple):
    """A node's heartbeat, judged on the controller's clock."""

    silent_for: timedelta  # since a scan first saw its current value
    clock_skew: timedelta | None  # its clock minus the controller's, at least; None: unknown


def observe(
    beats: dict[str, datetime], before: Sightings, since: datetime, now: datetime
) -> tuple[Sightings, dict[str, Judged]]:
    """The scan listing the nodes from ``since`` found these heartbeats (node → value, on the
    node's clock) at ``now`` (workflow time): what it sees, to carry on, and each node's
    judgement. A value that changed since ``before`` (or a node not in it) is seen now; one
    that did not was seen when ``before`` first saw it.

    A node whose clock is twenty minutes behind, heartbeating, then dead:

    >>> t = datetime(2026, 11, 1, 12, tzinfo=UTC)
    >>> behind = timedelta(minutes=-20)
    >>> first, judged = observe({"n": t + behind}, Sightings(), t, t)
    >>> judged["n"]  # the first sighting starts the clock; the skew is not known yet
    Judged(silent_for=datetime.timedelta(0), clock_skew=None)
    >>> m = timedelta(minutes=1)
    >>> second, judged = observe({"n": t + m + behind}, first, t + m, t + m)
    >>> judged["n"].silent_for
    datetime.timedelta(0)
    >>> judged["n"].clock_skew.total_seconds() / 60  # at least: written in the last minute
    -19.0
    >>> _, judged = observe({"n": t + m + behind}, second, t + 16 * m, t + 16 * m)
    >>> judged["n"].silent_for  # no new heartbeat for fifteen minutes of ours
    datetime.timedelta(seconds=900)
    """
    old, at = before.unpacked(), now.timestamp()
    seen = {}
    for node, beat in beats.items():
        value, prior = beat.timestamp(), old.get(node)
        if prior is not None and prior.beat == value:
            seen[node] = prior
        elif prior is None or before.since is None:
            seen[node] = Sighting(value, at, None)
        else:
            seen[node] = Sighting(value, at, at - before.since.timestamp())
    return Sightings.of(since, seen), {node: _judged(s, now) for node, s in seen.items()}


def _judged(sighting: Sighting, now: datetime) -> Judged:
    silent_for = max(now - datetime.fromtimestamp(sighting.seen, UTC), timedelta(0))
    if sighting.window is None:
        return Judged(silent_for, None)
    # Written at most ``window`` before it was seen: the skew lies in [low, low + window],
    # and what is reported is the end nearer zero.
    low = sighting.beat - sighting.seen
    high = low + sighting.window
    nearest = low if low > 0 else high if high < 0 else 0.0
    return Judged(silent_for, timedelta(seconds=round(nearest)))


def skewed(skew: timedelta | None, tolerance: timedelta = SKEW_TOLERANCE) -> bool:
    """Whether a clock skew is worth reporting (beyond ``tolerance`` either way)."""
    return skew is not None and abs(skew) > tolerance


def agent_silent(node: str, last_heartbeat: datetime, silent_for: timedelta) -> Finding:
    """What the scan reports for a node whose agent stopped heartbeating. Dated by the last
    heartbeat: every scan of the same silence reports the same finding, so a ladder that
    ended on it is not started again until the agent heartbeats and falls silent anew."""
    return Finding(
        node=node,
        check="scan",
        reason=AGENT_SILENT,
        severity=Severity.CRITICAL,
        evidence=f"no heartbeat from remedy's agent for {_rounded(silent_for)} "
        f"(last: {last_heartbeat:%Y-%m-%d %H:%M:%S}Z by the node's clock)",
        observed_at=last_heartbeat,
    )


def _rounded(age: timedelta) -> str:
    return str(timedelta(seconds=int(age.total_seconds())))
