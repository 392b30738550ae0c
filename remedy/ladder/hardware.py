"""The hardware record: incidents per physical GPU, by serial, and the blocklist.

A node name outlives its hardware (a replaced node comes back under the same name) and a GPU
can move between nodes (RMA, re-racking), so repeat offenders are counted per GPU serial.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from remedy.core.models import Component, Finding, NodeRef, Severity, Wraps

MAX_KEPT_INCIDENTS = 200  # the record is an audit trail, but its state must stay bounded
BLOCKLISTED = "Blocklisted"
GONE_WITH_THE_NODE = ("replaced", "admission_failed")  # outcomes after which no GPU is in service


class BlocklistPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_incidents: int = Field(default=3, ge=1)  # this many inside the window blocks the serial
    window: timedelta = timedelta(days=30)


class Incident(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime
    node: str
    fault: str  # the finding's headline, e.g. "Xid 48 on GPU 1 (SN…)"
    outcome: str  # recovered, replaced, needs_human, admission_failed
    source: str  # the workflow run that saw it: "<workflow id>/<run id>" (dedupes retries)
    # Which ladder ended it and at which rung (recovered: the rung that declared it fixed), so
    # a fault that comes back soon resumes above that rung (remedy/ladder/recurrence.py).
    runbook: str = ""
    rung: int | None = None
    action: str = ""


class InService(BaseModel):
    """Where the GPUs of an incident stay in service: the node's ladder and its agent queue."""

    node: NodeRef
    node_task_queue: str


class IncidentReport(BaseModel):
    """Recorded against every serial in ``serials``; start the record if it is the first."""

    serials: list[str]
    incident: Incident
    policy: BlocklistPolicy = BlocklistPolicy()
    in_service: InService | None = None  # None: a reporter from before, or nowhere to act


class UnblockRequest(BaseModel):
    by: str
    reason: str


class BlockedSerial(BaseModel):
    serial: str
    reason: str


class SerialsCheck(Wraps):
    """Which of these GPU serials are blocklisted?"""

    serials: list[str]


class Blocklisted(Wraps):
    blocked: list[BlockedSerial]


class HardwareRecordState(BaseModel):
    serial: str
    policy: BlocklistPolicy = BlocklistPolicy()
    incidents: list[Incident] = []
    blocked_reason: str | None = None  # stays until an operator unblocks: time heals no GPU
    unblocked: list[str] = []  # who unblocked, when and why (audit)
    counted_from: datetime | None = None  # incidents before an unblock no longer count
    # Blocked while in service on this node: it goes to its replace rung (the record's run
    # starts that ladder, then clears this); what happened is kept in ``taken_out``.
    take_out: InService | None = None
    taken_out: list[str] = []

    @property
    def blocked(self) -> bool:
        return self.blocked_reason is not None

    def add(
        self, incident: Incident, policy: BlocklistPolicy, in_service: InService | None = None
    ) -> None:
        """Record an incident once (a retried signal repeats it) and block the serial when
        too many fall inside the window; blocked while the node still holds it (it was not
        replaced), the node is to be taken out of service."""
        self.policy = policy
        if any(i.source == incident.source and i.fault == incident.fault for i in self.incidents):
            return
        self.incidents = [*self.incidents, incident][-MAX_KEPT_INCIDENTS:]
        if self.blocked:
            return
        recent = self.recent(incident.at)
        if len(recent) >= policy.max_incidents:
            self.blocked_reason = (
                f"GPU {self.serial}: {len(recent)} incidents within {policy.window.days} days "
                f"(limit {policy.max_incidents}): "
                + "; ".join(f"{i.at:%Y-%m-%d} {i.fault} → {i.outcome}" for i in recent[-3:])
            )
            if in_service is not None and incident.outcome not in GONE_WITH_THE_NODE:
                self.take_out = in_service

    def recent(self, now: datetime) -> list[Incident]:
        since = now - self.policy.window
        if self.counted_from is not None:
            since = max(since, self.counted_from)
        return [i for i in self.incidents if i.at >= since]

    def unblock(self, req: UnblockRequest, now: datetime) -> None:
        self.unblocked.append(f"{now.isoformat()} by {req.by}: {req.reason}")
        self.blocked_reason, self.counted_from = None, now


def blocklisted(node: str, serial: str, reason: str, now: datetime) -> Finding:
    """What the hardware record reports on the node that holds a GPU it just blocklisted."""
    return Finding(
        node=node,
        check="hardware",
        reason=BLOCKLISTED,
        severity=Severity.CRITICAL,
        component=Component(serial=serial),
        evidence=reason[:1024],
        observed_at=now,
    )
