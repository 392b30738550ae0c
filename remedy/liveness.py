"""An agent's liveness, as the fleet scan judges it: the heartbeat is the ``lastHeartbeatTime``
the agent writes on remedy's node conditions every probe round (``remedy.conditions``).

Why the conditions and not a Lease per node like the kubelet's: the agent already patches them
every interval, and the scan already lists every node in one call, so liveness costs no extra
write, no extra list, and no new permission (a Lease needs coordination.k8s.io RBAC for every
agent and a second list per scan). The kubelet moved to Leases to take its heartbeat off the
big node object; remedy's agent writes that status anyway.

A heartbeat older than ``silent_after`` (a few agent intervals) makes the node SILENT: the scan
starts an ``AgentSilent`` ladder. A node that never heartbeat is UNKNOWN: never healthy for
lack of information, but no ladder either (the agent may not run there: a CPU node).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from remedy.models import Finding, Severity

AGENT_SILENT = "AgentSilent"
AGENT_INTERVAL = timedelta(seconds=30)  # the agent's default probe interval
SILENT_AFTER = 3 * AGENT_INTERVAL  # a heartbeat older than this: the agent is silent


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
