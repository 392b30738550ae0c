"""An agent's liveness, as the fleet scan judges it: the heartbeat is the ``lastHeartbeatTime``
the agent writes on remedy's node conditions (``remedy.conditions``).

The agent writes its conditions when they change, and otherwise once per ``AGENT_HEARTBEAT``
(node-problem-detector's way: five minutes), so a quiet fleet of 10,000 nodes costs about 33
writes a second, not one per node per probe (``publish_due``).

Why the conditions and not a Lease per node like the kubelet's: the agent writes them anyway,
and the scan already lists every node in one call, so liveness costs no extra write, no extra
list, and no new permission (a Lease needs coordination.k8s.io RBAC for every agent and a
second list per scan).

A heartbeat older than ``silent_after`` (``SILENT_HEARTBEATS`` heartbeats by default, never
fewer than ``MIN_SILENT_HEARTBEATS``: one late write must not read as a dead agent) makes the
node SILENT: the scan starts an ``AgentSilent`` ladder. A node that never heartbeat is UNKNOWN:
never healthy for lack of information, but no ladder either (the agent may not run there: a
CPU node). A problem condition is as old as its heartbeat: one older than ``silent_after`` is
not a current fault (``remedy.fleet.current_problems``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from remedy.conditions import NodeCondition, said
from remedy.models import Finding, Severity

AGENT_SILENT = "AgentSilent"
AGENT_HEARTBEAT = timedelta(minutes=5)  # unchanged conditions are rewritten this often
SILENT_HEARTBEATS = 3
MIN_SILENT_HEARTBEATS = 2
SILENT_AFTER = SILENT_HEARTBEATS * AGENT_HEARTBEAT  # a heartbeat older than this: silent


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
        f"(last: {last_heartbeat:%Y-%m-%d %H:%M:%S}Z)",
        observed_at=last_heartbeat,
    )


def _rounded(age: timedelta) -> str:
    return str(timedelta(seconds=int(age.total_seconds())))
