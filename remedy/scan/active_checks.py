"""Active checks on a schedule: the deep diagnose, not only at admission, on every node of a pool.

An idle node (no GPU pods) is checked when its last check is older than the pool's
``interval``; a busy one only once its last check is older than ``max_age`` — then it is taken
out for the check (cordon and drain) under the pool's disruption budget. Pure: the
ActiveChecks workflow gathers the facts and acts on the plan.

Where the last check lives: the node's own ``GpuActiveCheck`` condition (see
``active_check_condition``). Its heartbeat is when the node was last checked (or first seen,
while it is ``Unknown``): on the node object, it survives controller restarts and workflow
resets, moves with the node, and is what ``kubectl describe node`` and kube-state-metrics show.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from remedy.core.models import NodeRef, ProbeReport
from remedy.detection.conditions import GPU_ACTIVE_CHECK, MAX_MESSAGE, NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import allowed_disruptions
from remedy.scan.fabric import FabricPolicy

PASSED, NOT_CHECKED = "ActiveCheckPassed", "NotCheckedYet"


class ActiveCheckPolicy(BaseModel):
    """One pool's schedule: ``every`` how often the pool is looked at; an idle node is checked
    once its last check is older than ``interval``, a busy one is taken out once it is older
    than ``max_age``."""

    model_config = ConfigDict(frozen=True)

    every: timedelta = Field(default=timedelta(hours=1), gt=timedelta(0))
    interval: timedelta = Field(default=timedelta(days=1), gt=timedelta(0))
    max_age: timedelta = Field(default=timedelta(days=7), gt=timedelta(0))
    diagnose_timeout: timedelta = timedelta(minutes=30)
    drain_timeout: timedelta = timedelta(minutes=30)
    # A busy node waits this long for a lease, then gives the request back and waits for the
    # next round: never more of the pool out than the budget allows.
    lease_wait: timedelta = timedelta(minutes=30)
    # Idle nodes are checked outside the budget, cordoned for the whole diagnose: at most this
    # many of the pool at once (a count, a share, all-but-N; at least 1), the rest next round.
    idle_at_once: str = "20%"
    # After a passing diagnose, on the node the check holds (never one serving work): none by
    # default. A failed test fails the check (remedy/scan/fabric.py).
    fabric: FabricPolicy = FabricPolicy()

    @field_validator("idle_at_once")
    @classmethod
    def _parses(cls, value: str) -> str:
        allowed_disruptions(value, 1)
        return value

    def idle_cap(self, pool_size: int) -> int:
        """In a pool of 10 with 20 %: 2 idle nodes at once; never fewer than 1."""
        return max(1, allowed_disruptions(self.idle_at_once, pool_size))


class ActiveChecksInput(BaseModel):
    """The pool's round (the schedule's action)."""

    pool: str
    policy: ActiveCheckPolicy = ActiveCheckPolicy()
    node_task_queue: str | None = None  # None: each node's own agent queue
    node_pickup_timeout: timedelta = timedelta(minutes=2)


class NodeCheckInput(BaseModel):
    """One node's check (a child of the round)."""

    node: NodeRef
    take_out: bool  # busy: lease, cordon and drain before the diagnose
    paired: bool = False  # its round runs pair tests: wait for their verdict before the end
    policy: ActiveCheckPolicy = ActiveCheckPolicy()
    node_task_queue: str
    node_pickup_timeout: timedelta = timedelta(minutes=2)


class CheckResult(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # the diagnose failed, or could not run: the node's ladder starts
    DEFERRED = "deferred"  # no lease (or no drain) this round: the next round asks again
    SKIPPED = "skipped"  # cordoned by someone else, or a ladder holds it


class NodeCheckResult(BaseModel):
    node: str
    result: CheckResult
    detail: str = ""
    remediation: str = ""  # the ladder a failure started


class ActiveCheckPublish(BaseModel):
    """Write the node's GpuActiveCheck condition: the report's verdict, or (no report) that
    remedy has seen the node and not checked it yet."""

    node: NodeRef
    report: ProbeReport | None = None


class CheckFailure(BaseModel):
    """A failed check's findings, for the node's ladder (the runbook is matched by the
    controller, as the agent matches its probe's)."""

    node: NodeRef
    report: ProbeReport
    node_task_queue: str
    task_queue: str


class NodeWorkload(BaseModel):
    gpu_pods: int | None = None  # None: unknown, so busy (fail closed)
    held_by: str = ""  # a running workflow that owns the node now (a ladder, an admission)

    @property
    def idle(self) -> bool:
        return self.gpu_pods == 0


class Workloads(BaseModel):
    nodes: dict[str, NodeWorkload] = {}


class DueNode(BaseModel):
    name: str
    last_checked: datetime | None  # None: never seen by the active checks
    stale: bool  # past max age (or failed last time): taken out under the budget if busy


def last_checked(node: NodeFacts) -> datetime | None:
    check = node.active_check
    return check.last_heartbeat_time if check else None


def due_nodes(nodes: list[NodeFacts], policy: ActiveCheckPolicy, now: datetime) -> list[DueNode]:
    """The pool's nodes whose check is due, by name. Left alone: a node remedy does not
    manage, one cordoned (by anyone), one behind admission or rejected by it, one another
    repairer is at work on.

    With an interval of 1 day and a max age of 7: a node checked 2 days ago is due (checked
    if idle); one checked 8 days ago is stale (taken out if busy); a node whose last check
    failed is stale at once; one never seen, or first seen 2 days ago (Unknown), is due, not
    yet stale.
    """
    due = []
    for node in sorted(nodes, key=lambda n: n.name):
        if not node.managed or node.unschedulable or node.awaiting_admission or node.rejected:
            continue
        if node.other_repairer is not None:
            continue
        check, last = node.active_check, last_checked(node)
        if check is None or last is None:  # first seen now: checked when idle, not taken out
            due.append(DueNode(name=node.name, last_checked=None, stale=False))
            continue
        age = now - last
        stale = check.status == "True" or age >= policy.max_age
        if stale or check.status == "Unknown" or age >= policy.interval:
            due.append(DueNode(name=node.name, last_checked=last, stale=stale))
    return due


class RoundPlan(BaseModel):
    idle: list[str] = []  # checked now
    idle_later: list[str] = []  # idle, beyond the pool's idle cap: the next round
    take_out: list[str] = []  # busy and stale: under the budget
    waiting: list[str] = []  # busy, not stale yet: wait for an idle moment
    held: list[str] = []  # a workflow owns the node now


def plan_round(due: list[DueNode], workloads: Workloads, idle_cap: int | None = None) -> RoundPlan:
    """With an ``idle_cap``, the idle nodes most overdue are checked first (stale ones, then
    the oldest check, then those never checked), at most ``idle_cap`` of them."""
    plan = RoundPlan()
    for node in due:
        load = workloads.nodes.get(node.name, NodeWorkload())
        if load.held_by:
            plan.held.append(node.name)
        elif load.idle:
            plan.idle.append(node.name)
        elif node.stale:
            plan.take_out.append(node.name)
        else:
            plan.waiting.append(node.name)
    if idle_cap is not None:
        by_name = {d.name: d for d in due}
        idle = sorted(plan.idle, key=lambda name: _overdue_first(by_name[name]))
        plan.idle, plan.idle_later = idle[:idle_cap], idle[idle_cap:]
    return plan


def _overdue_first(node: DueNode) -> tuple[bool, bool, float]:
    last = node.last_checked
    return (not node.stale, last is None, last.timestamp() if last else 0.0)


def unseen(nodes: list[NodeFacts]) -> list[str]:
    """Nodes with no GpuActiveCheck condition: marked first seen (Unknown), so a fleet that
    adopts active checks is not taken out all at once — each busy node's max age runs from
    the day remedy first saw it."""
    return sorted(n.name for n in nodes if n.active_check is None and n.managed)


def active_check_condition(
    report: ProbeReport | None, previous: NodeCondition | None, now: datetime
) -> NodeCondition:
    """The node's GpuActiveCheck condition (True: the last check failed). The heartbeat is
    when the node was last checked; the transition time moves only when the verdict does."""
    status: Literal["True", "False", "Unknown"]
    if report is None:
        if previous is not None:
            return previous  # already seen: nothing to mark
        status, reason, message = "Unknown", NOT_CHECKED, "not checked by remedy yet"
    elif report.healthy:
        status, reason = "False", PASSED
        message = f"deep diagnose passed: {', '.join(report.checks_run)}"
    else:
        bad = [f for f in report.findings if f.unhealthy]
        status = "True"
        reason = bad[0].reason if bad else "ActiveCheckFailed"
        message = "; ".join(f"{f.headline()}: {f.evidence}" for f in bad) or "no check could run"
    unchanged = previous is not None and (previous.status, previous.reason) == (status, reason)
    return NodeCondition(
        type=GPU_ACTIVE_CHECK,
        status=status,
        reason=reason,
        message=message[:MAX_MESSAGE],
        last_heartbeat_time=now,
        last_transition_time=previous.last_transition_time if previous and unchanged else now,
    )


class RoundSummary(BaseModel):
    pool: str
    at: datetime
    plan: RoundPlan = RoundPlan()
    results: list[NodeCheckResult] = []
    overdue: int = 0  # nodes past max age that this round could not check
    pairs: str = ""  # the pair tests' outcome, when the pool runs them

    def markdown(self) -> str:
        by = {r: [x.node for x in self.results if x.result is r] for r in CheckResult}
        lines = [f"**active checks, pool {self.pool}** at {self.at:%Y-%m-%d %H:%M:%S}Z"]
        lines += [f"{r.value}: {', '.join(names)}" for r, names in by.items() if names]
        if self.plan.idle_later:
            lines.append(f"idle, checked next round: {', '.join(self.plan.idle_later)}")
        if self.plan.waiting:
            lines.append(f"busy, waiting for an idle moment: {', '.join(self.plan.waiting)}")
        if self.plan.held:
            lines.append(f"held by a ladder or admission: {', '.join(self.plan.held)}")
        lines += [self.pairs] if self.pairs else []
        lines.append(f"past max age and not checked: {self.overdue}")
        return "\n\n".join(lines)
