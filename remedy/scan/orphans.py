"""Remedy's cordon on a node no ladder owns (its ladder failed, or was terminated, before it
gave the node back or handed it to a person): what the scan asks the controller to adopt, and
the finding it reports for each."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from remedy.core.models import Finding, NodeRef, Severity

ORPHANED_CORDON = "OrphanedCordon"


class OrphanCheck(BaseModel):
    """Nodes with remedy's cordon and no ladder running: start a ladder for each that no
    ladder left to a person (the answer names them)."""

    nodes: list[NodeRef]
    task_queue: str
    node_task_queue: str | None = None  # None: each node's own agent queue
    # When each node's agent wrote its cordon (NodeFacts.agent_cordoned_at): a cordon written
    # after the node's last ladder closed was never taken up by a ladder.
    agent_cordoned_at: dict[str, datetime] = {}


def orphaned_cordon(node: str, now: datetime) -> Finding:
    """What the scan reports for remedy's cordon on a node no ladder owns."""
    return Finding(
        node=node,
        check="scan",
        reason=ORPHANED_CORDON,
        severity=Severity.CRITICAL,
        evidence="remedy's cordon is on the node and no ladder owns it (its ladder failed, "
        "or was terminated, before it gave the node back or handed it to a person)",
        observed_at=now,
    )
