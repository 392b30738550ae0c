"""The fleet as the scan sees it: facts per node from the cluster, what to start, and the
summary per pool. Pure: the FleetScan workflow gathers the facts and acts on the plan."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel

from remedy.attribution.guard import GuardPolicy
from remedy.attribution.job_report import JobsGoodput
from remedy.core.durations import format_duration
from remedy.core.models import Finding, NodeRef, Severity, Wraps
from remedy.detection.conditions import AGENT_CONDITIONS, NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.quarantine import SilenceStorm
from remedy.ladder.remediation import Phase
from remedy.runbook.schema import FROM_CONDITION
from remedy.scan.admission import AdmissionPolicy
from remedy.scan.liveness import SILENT_AFTER, SKEW_TOLERANCE, Sightings, observe
from remedy.scan.monitors import FRESH_FOR as MONITOR_FRESH_FOR

_XID_REASON = re.compile(r"^Xid(\d+)$")  # the agent's reason for an Xid finding: "Xid48"


class NodeStatus(StrEnum):
    HEALTHY = "healthy"
    IN_REMEDIATION = "in_remediation"
    DEGRADED = "degraded"  # GPUs quarantined, the node schedulable: the other GPUs still serve
    ADMITTING = "admitting"
    NEEDS_HUMAN = "needs_human"  # remedy's cordon, nothing running: the ladder ran out
    CORDONED = "cordoned"  # cordoned by someone else
    REJECTED = "rejected"  # failed admission; waits for its replacement
    UNHEALTHY = "unhealthy"  # a problem condition and nothing running (the scan starts one)
    SILENT = "silent"  # its agent's heartbeat is stale (the scan starts an AgentSilent ladder)
    UNKNOWN = "unknown"  # its agent never reported: not healthy for lack of information
    UNMANAGED = "unmanaged"
    # Another repairer (Karpenter, EKS) is at work on it: remedy starts nothing there, and it
    # does not count as healthy (NodeFacts.other_repairer says who).
    OTHER_REPAIRER = "other_repairer"


class FleetNodes(Wraps):
    nodes: list[NodeFacts]


STARTING = "starting"  # a ladder that has not published its phase yet


class LadderSeen(BaseModel):
    """A running remediation as visibility shows it: its node, pool (empty until the ladder
    has set its search attributes), phase and since when."""

    node: str = ""
    pool: str
    phase: str
    since: datetime


class OpenWork(BaseModel):
    """Nodes with a running remediation or admission."""

    remediating: list[str] = []
    admitting: list[str] = []
    checking: list[str] = []  # an active check holds the node (its cordon is that check's)
    ladders: list[LadderSeen] = []  # the running remediations' phases (for the metrics)


def ladder_phases(
    ladders: list[LadderSeen], pool_of: dict[str, str], at: datetime
) -> dict[tuple[str, str], tuple[int, float]]:
    """(pool, phase) → running ladders and the seconds the oldest has been in that phase, for
    every phase of every pool (0, 0.0 where none), so a phase emptied shows as such. A ladder
    with no pool yet counts in its node's (``pool_of``: node → pool), else in ``unknown``."""
    ladders = [
        la if la.pool else la.model_copy(update={"pool": pool_of.get(la.node, "unknown")})
        for la in ladders
    ]
    phases = [STARTING, *(ph.value for ph in Phase if ph is not Phase.DONE)]
    pools = sorted({*pool_of.values(), *(la.pool for la in ladders)})
    out = {(pool, phase): (0, 0.0) for pool in pools for phase in phases}
    for ladder in ladders:
        running, oldest = out.get((ladder.pool, ladder.phase), (0, 0.0))
        age = max((at - ladder.since).total_seconds(), 0.0)
        out[(ladder.pool, ladder.phase)] = (running + 1, max(oldest, age))
    return out


def judge_liveness(
    nodes: list[NodeFacts], before: Sightings, since: datetime, now: datetime
) -> tuple[list[NodeFacts], Sightings]:
    """Each node's silence and clock skew on the controller's clock, from what the scans saw
    before (``remedy.scan.liveness.observe``; the nodes listed from ``since``, judged at ``now``),
    and what this scan saw, to carry on to the next."""
    beats = {n.name: n.last_heartbeat for n in nodes if n.last_heartbeat is not None}
    seen, judged = observe(beats, before, since, now)
    return [
        n.model_copy(update={"silent_for": j.silent_for, "clock_skew": j.clock_skew})
        if (j := judged.get(n.name))
        else n.model_copy(update={"silent_for": None, "clock_skew": None})
        for n in nodes
    ], seen


def current_problems(
    node: NodeFacts, silent_after: timedelta = SILENT_AFTER
) -> list[NodeCondition]:
    """The node's problem conditions that are still news: a problem whose heartbeat is older
    than ``silent_after`` is history, not a current fault (its age: from its heartbeat to the
    agent's newest on the node's clock, then the newest's silence on the controller's). Its agent
    either went silent (the node is SILENT, and its AgentSilent ladder re-probes it) or no
    longer publishes that condition (a NIC check since turned off): neither starts the fault's
    ladder from a stale word. Without a heartbeat to measure by (a condition with no agent
    behind it) a problem counts as it stands. Another monitor's (remedy.scan.monitors) is
    rewritten on its own schedule: it is stale past that table's ``FRESH_FOR``."""
    if node.last_heartbeat is None or node.silent_for is None:
        return node.problems
    now = node.last_heartbeat + node.silent_for
    return [
        c
        for c in node.problems
        if now - c.last_heartbeat_time
        <= (silent_after if c.type in AGENT_CONDITIONS else MONITOR_FRESH_FOR)
    ]


def status_of(
    node: NodeFacts,
    work: OpenWork,
    silent_after: timedelta = SILENT_AFTER,
    stale_problems: bool = True,
) -> NodeStatus:
    """``stale_problems``: judge problems by their heartbeat (``current_problems``); False is
    how scans before that judged them (any problem condition, however old), kept for replay."""
    if not node.managed:
        return NodeStatus.UNMANAGED
    degraded = bool(node.gpus_out) and not node.unschedulable
    if node.name in work.remediating or node.name in work.checking:
        # remedy is at work on it: a ladder or a check; on GPUs only, the node still serves
        return NodeStatus.DEGRADED if degraded else NodeStatus.IN_REMEDIATION
    if node.name in work.admitting:
        return NodeStatus.ADMITTING
    if node.other_repairer is not None:
        return NodeStatus.OTHER_REPAIRER  # one repairer per node: not remedy's to start on
    if node.rejected is not None:
        return NodeStatus.REJECTED
    if node.cordoned_by_remedy:
        return NodeStatus.NEEDS_HUMAN
    if current_problems(node, silent_after) if stale_problems else node.problems:
        return NodeStatus.UNHEALTHY
    if degraded:  # a quarantine no ladder holds: someone looks at that GPU
        return NodeStatus.DEGRADED
    if node.awaiting_admission:
        return NodeStatus.ADMITTING
    if node.unschedulable:
        return NodeStatus.CORDONED
    if node.silent_for is None:
        return NodeStatus.UNKNOWN
    if node.silent_for > silent_after:
        return NodeStatus.SILENT
    return NodeStatus.HEALTHY


class ScanPlan(BaseModel):
    remediate: list[NodeFacts] = []  # a problem condition that no agent turned into a ladder
    admit: list[NodeFacts] = []  # new nodes waiting behind the admission taint
    # remedy's cordon and no ladder running: left for a human, or orphaned (its ladder failed
    # or was terminated): the scan asks which.
    cordoned: list[NodeFacts] = []
    silent: list[NodeFacts] = []  # the agent's heartbeat went stale: an AgentSilent ladder


def plan_scan(
    nodes: list[NodeFacts],
    work: OpenWork,
    silent_after: timedelta = SILENT_AFTER,
    stale_problems: bool = True,
) -> ScanPlan:
    """A node to remediate carries only its current problems (``status_of``)."""
    plan = ScanPlan()
    for node in nodes:
        status = status_of(node, work, silent_after, stale_problems)
        if status is NodeStatus.UNHEALTHY:
            if stale_problems:
                node = node.model_copy(update={"problems": current_problems(node, silent_after)})
            plan.remediate.append(node)
        elif status is NodeStatus.SILENT:
            plan.silent.append(node)
        elif status is NodeStatus.NEEDS_HUMAN:
            plan.cordoned.append(node)
        elif status is NodeStatus.ADMITTING and node.name not in work.admitting:
            plan.admit.append(node)
    return plan


def finding_from_condition(node: str, condition: NodeCondition) -> Finding:
    """What the scan reports for a problem condition nobody acted on: its reason is the
    finding's reason (the agent wrote the first bad finding's reason there), seen when the
    condition was last confirmed (its heartbeat), not when it first turned True. Another
    monitor's (remedy.scan.monitors) is seen when it turned True: the same observation at each
    of its monitor's rewrites, so once a ladder handled it, the scan's next report of it is
    stale and starts nothing (a monitor slow to clear it after a recovery); a new transition
    starts a new ladder."""
    xid = _XID_REASON.match(condition.reason)
    ours = condition.type in AGENT_CONDITIONS
    return Finding(
        node=node,
        check=FROM_CONDITION,
        reason=condition.reason,
        severity=Severity.CRITICAL,
        xid=int(xid[1]) if xid else None,
        evidence=f"{condition.type}: {condition.message}"[:1024],
        observed_at=condition.last_heartbeat_time if ours else condition.last_transition_time,
    )


# Nodes no running workflow owns that still need someone: `remedy status` lists them by name.
ATTENTION = (
    NodeStatus.NEEDS_HUMAN,
    NodeStatus.DEGRADED,
    NodeStatus.REJECTED,
    NodeStatus.UNHEALTHY,
    NodeStatus.SILENT,
    NodeStatus.UNKNOWN,
    NodeStatus.OTHER_REPAIRER,
)
MAX_ATTENTION = 200  # per pool: a result, and a scan's history, stay small in a storm
SKEW_S = int(SKEW_TOLERANCE.total_seconds())


class PoolSummary(BaseModel):
    pool: str
    nodes: int = 0
    counts: dict[NodeStatus, int] = {}
    gpus_out: int = 0  # GPUs quarantined on nodes that still serve (whole nodes: the counts)
    attention: dict[str, NodeStatus] = {}
    held: list[str] = []  # nodes an abort held for a person (at most MAX_ATTENTION)
    # Clocks off the controller's by more than remedy.scan.liveness.SKEW_TOLERANCE: how many, and
    # node → skew in seconds (+ ahead, − behind; at most MAX_ATTENTION); and the largest skew
    # known in the pool, within the tolerance or not.
    skewed: int = 0
    clock_skew: dict[str, int] = {}
    largest_skew_s: int = 0

    def count(self, status: NodeStatus) -> int:
        return self.counts.get(status, 0)


class FleetSummary(BaseModel):
    at: datetime
    pools: list[PoolSummary] = []
    started_remediations: list[str] = []
    started_admissions: list[str] = []
    job_failures_reported: list[str] = []  # "namespace/job: pod"
    guards_finished: list[str] = []
    job_watch_error: str = ""  # the job watch failed this time (e.g. RBAC): why
    orphaned_cordons: list[str] = []  # remedy's cordon, no ladder owns it: a ladder started
    liveness: Sightings = Sightings()  # what the next scan judges heartbeats from
    silence: SilenceStorm | None = None  # many agents silent at once: no ladders for them
    goodput: JobsGoodput | None = None  # guarded jobs' and pools' (with watch_jobs)

    def markdown(self) -> str:
        head = "| pool | nodes | " + " | ".join(s.value for s in NodeStatus) + " |"
        rule = "|---" * (len(NodeStatus) + 2) + "|"
        rows = [
            f"| {p.pool} | {p.nodes} | " + " | ".join(str(p.count(s)) for s in NodeStatus) + " |"
            for p in self.pools
        ]
        started = (
            f"\n\nstarted remediation: {', '.join(self.started_remediations) or '—'}; "
            f"admission: {', '.join(self.started_admissions) or '—'}"
        )
        if self.orphaned_cordons:
            started += (
                f"\n\norphaned cordons (a ladder started for each): "
                f"{', '.join(self.orphaned_cordons)}"
            )
        skews = [
            f"{node} {_signed(seconds)}"
            for p in self.pools
            for node, seconds in p.clock_skew.items()
        ]
        if skews:
            started += (
                f"\n\nclocks off the controller's by more than {_signed(SKEW_S)[1:]} "
                f"(not trusted: liveness is judged on the controller's): {', '.join(skews)}"
            )
        if self.silence:
            started += f"\n\n**AGENTS SILENT**: {self.silence.note()}"
        if self.job_watch_error:
            started += f"\n\njob watch failed: {self.job_watch_error}"
        if self.job_failures_reported or self.guards_finished:
            started += (
                f"\n\njob failures to guards: "
                f"{', '.join(self.job_failures_reported) or '—'}; guards ended: "
                f"{', '.join(self.guards_finished) or '—'}"
            )
        return (
            f"**fleet at {self.at:%Y-%m-%d %H:%M:%S}Z**\n\n"
            + "\n".join([head, rule, *rows])
            + started
        )


def summarise(
    nodes: list[NodeFacts],
    work: OpenWork,
    at: datetime,
    silent_after: timedelta = SILENT_AFTER,
    stale_problems: bool = True,
) -> FleetSummary:
    pools: dict[str, PoolSummary] = {}
    for node in nodes:
        pool = pools.setdefault(node.pool, PoolSummary(pool=node.pool))
        status = status_of(node, work, silent_after, stale_problems)
        pool.nodes += 1
        pool.counts[status] = pool.count(status) + 1
        pool.gpus_out += len(node.gpus_out)
        if status in ATTENTION and len(pool.attention) < MAX_ATTENTION:
            pool.attention[node.name] = status
        if node.held_for_person and len(pool.held) < MAX_ATTENTION:
            pool.held.append(node.name)
        if node.clock_skew is not None:
            _count_skew(pool, node.name, round(node.clock_skew.total_seconds()))
    return FleetSummary(at=at, pools=[pools[name] for name in sorted(pools)])


def _count_skew(pool: PoolSummary, node: str, seconds: int) -> None:
    if abs(seconds) > abs(pool.largest_skew_s):
        pool.largest_skew_s = seconds
    if abs(seconds) > SKEW_S:
        pool.skewed += 1
        if len(pool.clock_skew) < MAX_ATTENTION:
            pool.clock_skew[node] = seconds


def _signed(seconds: int) -> str:
    """-20m, +1h2m3s: a skew as an operator reads it."""
    return ("+" if seconds >= 0 else "-") + format_duration(timedelta(seconds=abs(seconds)))


class ScanInput(BaseModel):
    # Where node-local work goes: None → each node's own agent queue (production); the
    # simulated fleet serves every node from one queue.
    node_task_queue: str | None = None
    admit_new_nodes: bool = True
    admission: AdmissionPolicy = AdmissionPolicy()
    # Hand guarded jobs' failed pods to their guards, and end the guards of finished jobs
    # (needs a worker with the job side: ``remedy controller`` on Kubernetes).
    watch_jobs: bool = False
    guard_policy: GuardPolicy = GuardPolicy()
    # A heartbeat older than this: the agent is silent (a few of its heartbeats).
    agent_silent_after: timedelta = SILENT_AFTER
    # More than this share of the fleet (else of a pool) silent at once, at least
    # ``silence_min_nodes``: a silence storm (remedy.disruption.quarantine.silence_storm), no
    # ladders.
    silence_share: float = 0.2
    silence_min_nodes: int = 3


class NodeNames(BaseModel):
    nodes: list[str]


class FindingStart(BaseModel):
    """Start (or join) a node's ladder for a finding the controller made itself (an agent gone
    silent, a blocklisted GPU in service); the runbook is the controller's match."""

    node: NodeRef
    finding: Finding
    task_queue: str
    node_task_queue: str
    # Start only once the node's running ladder (if any) has closed: a report would join it
    # and be dropped if that ladder is finishing.
    after_running_ladder: bool = False


class ConditionStart(BaseModel):
    """Start a remediation for a problem condition that no agent reported."""

    node: NodeFacts
    condition: NodeCondition
    node_task_queue: str
    task_queue: str
