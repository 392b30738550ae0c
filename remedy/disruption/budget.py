"""Limits on disruption: how many nodes of a pool may be disrupted at once, and the storm
breaker that stops disruptive work when too much of a pool looks sick at once.

Pure functions and the budget's state; the DisruptionBudget workflow interprets them.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

from remedy.core.models import Scope, Wraps
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget_messages import (
    ASK_KEPT_FOR,
    HELD_FOR_HUMAN,
    CordonAsk,
    HumanHold,
    HumanWait,
)

# The budget whose breaker counts every pool's reports against the whole fleet (no pool label
# value can start with "_", so no pool is named so): `remedy resume-pool _cluster` closes it.
CLUSTER_POOL = "_cluster"

_ALL_BUT = re.compile(r"^all-but-(\d+)$")
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)%$")


def allowed_disruptions(spec: str, pool_size: int) -> int:
    """How many nodes may hold a disruption lease at once.

    ``"2"`` → 2; ``"20%"`` of the pool rounds up — in a pool of 3 nodes, 20 % rounds up to
    1 node; ``"all-but-1"`` of a pool of 8 → 7. A pool of 0 nodes allows 0, and a count is
    never more than the pool.
    """
    spec = spec.strip().lower()
    if match := _ALL_BUT.match(spec):
        allowed = pool_size - int(match[1])
    elif match := _PERCENT.match(spec):
        allowed = math.ceil(pool_size * float(match[1]) / 100)
    elif spec.isdigit():
        allowed = int(spec)
    else:
        raise ValueError(
            f"{spec!r} is not a disruption budget: use a count (2), a share (20%) or all-but-N"
        )
    return max(0, min(allowed, pool_size))


def storm(unhealthy_nodes: int, pool_size: int, share: float, min_nodes: int = 3) -> bool:
    """More than ``share`` of the pool unhealthy at once: in a pool of 10 with a 20 % share,
    3 unhealthy nodes trip the breaker and 2 do not. It takes at least ``min_nodes`` unhealthy
    nodes, so one bad node in a pool of 4 is a fault, not a storm."""
    return pool_size > 0 and unhealthy_nodes >= min_nodes and unhealthy_nodes > share * pool_size


class BudgetPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    max_disruption: str = "20%"
    storm_share: float = Field(default=0.2, gt=0, le=1)
    storm_window: timedelta = timedelta(minutes=10)
    storm_min_nodes: int = Field(default=3, ge=1)
    reclaim_every: timedelta = timedelta(minutes=1)  # how often to look for dead holders
    # The share of the whole fleet, across pools, that trips the cluster's breaker (None: no
    # cluster-wide breaker; `remedy controller --cluster-storm-share` sets it).
    cluster_share: float | None = Field(default=None, gt=0, le=1)
    max_gpus_out: str | None = None  # GPUs out at once, as max_disruption; None: no cap

    @field_validator("max_disruption", "max_gpus_out")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        allowed_disruptions("0" if value is None else value, 1)
        return value


class LeaseWanted(BaseModel):
    """A ladder asks for a lease (the activity adds what only the controller knows)."""

    holder: str  # the NodeRemediation workflow id
    node: str
    pool: str
    task_queue: str  # where the budget workflow runs
    cordoned: bool = False  # under remedy's cordon as it asks: out of scheduling while it waits
    scope: Scope = Scope.NODE  # GPU: a GPU-scoped rung's lease, for ``gpus`` only
    gpus: list[int] = []  # the faulty GPUs a GPU-scoped lease takes out
    answer: bool = False  # it reads a grant in the request's answer (else: only by signal)
    run: str = ""  # the run that asks: its grant names it (empty: a ladder from before)
    token: str = ""  # the ladder's for this request: its grant carries it back (empty: before)


class LeaseRequest(LeaseWanted):
    """The budget's signal: the request with the pool's size and the controller's policy."""

    pool_size: int
    policy: BudgetPolicy = BudgetPolicy()
    pool_gpus: int = 0  # the pool's GPUs (the base of ``max_gpus_out``)
    node_gpus: int = 0  # the node's GPUs: what a node lease takes out


class LeaseGrant(Wraps):
    """The budget tells a ladder its lease is granted."""

    pool: str
    scope: Scope = Scope.NODE  # sent (the model form) only for a GPU lease: a node's is bare
    run: str = ""  # the run whose request it answers (empty: a budget from before)
    token: str = ""  # the request's token, carried back (empty: a budget or request from before)


class Lease(BaseModel):
    holder: str
    node: str
    granted_at: datetime
    scope: Scope = (
        Scope.NODE
    )  # GPU: counts in GPUs only (remedy/disruption/budget_gpus.py), not as a node
    gpus: list[int] = []  # a GPU lease's GPUs
    node_gpus: int = 0  # the node's GPUs: what a node lease (or a node left for a person) takes


class LeaseRelease(BaseModel):
    """Give a lease back; ``for_human``: the ladder ended with remedy's cordon still on its node
    (left to a person), so it keeps counting as a hold (``HumanHold``), which an operator ends
    by releasing its holder, ``held-for-human/<node>``."""

    holder: str
    for_human: bool = False
    # The holder's node: a hold even with no lease (a ladder left for a person before any
    node: str = ""  # disruptive rung, an active check handing its node on); empty: from before
    # With ``for_human`` False: the node stays cordoned for a person, but its share goes back
    # (a rung's ``on_approval_timeout: release``); a budget from before: not tracked.
    still_out: bool = False
    pool: str = ""  # whose budget, for the activity that signals it (empty: signalled before)


class BudgetState(BaseModel):
    pool: str
    policy: BudgetPolicy = BudgetPolicy()
    pool_size: int = 0
    pool_gpus: int = 0
    holders: list[Lease] = []
    waiting: list[LeaseRequest] = []
    unhealthy: dict[str, datetime] = {}  # node → last reported, inside the storm window
    tripped: bool = False
    tripped_at: datetime | None = None
    breaker_note: str = ""
    grants: int = 0
    reclaimed: int = 0
    # The holders were rebuilt from the running ladders: a run started afresh (the last one
    # was terminated) must not forget who holds a lease, or the cap could be exceeded.
    rebuilt: bool = False
    held: list[HumanHold] = []  # left cordoned for a person: they count as leases do
    waiting_for_human: list[HumanWait] = []  # lease holders whose ladders wait for a person
    # Ladders waiting for leave to cordon while the breaker is tripped
    # (remedy.disruption.quarantine).
    asking: list[CordonAsk] = []
    # Out of scheduling when an operator resumed the breaker: the share it limits leaves them
    # out until it trips again (else a resume would trip it again at once).
    accepted_out: list[str] = []
    trips: int = 0  # times the breaker tripped
    slow_start: int = (
        0  # after a close by itself, cordons let go unproven (remedy.disruption.slow_start)
    )
    admitted: list[CordonAsk] = []  # given leave in the slow start, not yet proven real
    unhealthy_pools: dict[str, str] = {}  # node → its pool (the cluster's budget counts pools)

    @property
    def allowed(self) -> int:
        return allowed_disruptions(self.policy.max_disruption, self.pool_size)

    @property
    def counted_holds(self) -> list[HumanHold]:
        return [h for h in self.held if h.counted]

    @property
    def node_leases(self) -> int:
        return sum(1 for lease in self.holders if lease.scope is Scope.NODE)

    @property
    def in_use(self) -> int:
        """Node leases and holds: a pool of 10 at 20 % allows 2, so one node held for a human
        and one lease leave none for a third node (a hold whose share went back counts for
        none; a GPU lease only in GPUs)."""
        return self.node_leases + len(self.counted_holds)

    def note_human_wait(self, wait: HumanWait) -> None:
        """A ladder waits for a person (or no longer). Only a lease holder's wait holds the
        pool: a ladder with no lease blocks no one."""
        others = [w for w in self.waiting_for_human if w.holder != wait.holder]
        holds = any(lease.holder == wait.holder for lease in self.holders)
        self.waiting_for_human = [*others, wait] if wait.since and holds else others

    def forget_gone_waits(self) -> None:
        """A wait ends with its holder's lease (released, reclaimed)."""
        holders = {lease.holder for lease in self.holders}
        self.waiting_for_human = [w for w in self.waiting_for_human if w.holder in holders]

    def hand_to_human(self, holder: str, since: datetime, node: str = "") -> None:
        """The holder's node stays out for a person (or for the ladder an active check handed
        it to): its lease becomes a hold, and so does ``node`` when the holder had no lease —
        remedy's cordon is on it all the same, and a budget started afresh would count it. A
        node another holder's lease covers is counted already."""
        gpus = {le.node: le.node_gpus for le in self.holders if le.holder == holder}
        for name in self._nodes_of(holder, node):
            covered = any(le.node == name and le.holder != holder for le in self.holders)
            if not covered and all(h.node != name for h in self.counted_holds):
                others = [h for h in self.held if h.node != name]  # an uncounted one: counted
                self.held = [*others, HumanHold(node=name, since=since, gpus=gpus.get(name, 0))]

    def keep_out(self, holder: str, since: datetime, node: str = "") -> None:
        """The holder's node stays cordoned for a person, but its share goes back to the pool
        (``on_approval_timeout: release``): out of scheduling, not against the cap. It ends as
        a hold does, when remedy's cordon goes from the node."""
        for name in self._nodes_of(holder, node):
            if all(h.node != name for h in self.held):
                self.held = [*self.held, HumanHold(node=name, since=since, counted=False)]

    def _nodes_of(self, holder: str, node: str) -> list[str]:
        nodes = [lease.node for lease in self.holders if lease.holder == holder]
        return nodes or ([node] if node else [])

    def why_not_release(self, holder: str) -> str:
        """Why an operator's release of ``holder`` would change nothing (empty: it would). Only
        a hold for a person is theirs to release: with gpu-2 held and a ladder's lease on gpu-4,
        releasing ``held-for-human/gpu-7`` answers "gpu-7 is not held for a person (holders:
        gpu-2 (held for a person), gpu-4 (lease))"."""
        if any(h.holder == holder for h in self.held):
            return ""
        holders = [
            f"{h.node} (held for a person{'' if h.counted else ', share given back'})"
            for h in self.held
        ]
        holders += [f"{lease.node} (lease)" for lease in self.holders]
        node = holder.removeprefix(HELD_FOR_HUMAN)
        return f"{node} is not held for a person (holders: {', '.join(holders) or 'none'})"

    def waiting_on_held(self) -> list[LeaseRequest]:
        """Requests for nodes that became held while they waited: each takes its hold over."""
        held = {h.node for h in self.counted_holds}
        return [w for w in self.waiting if w.node in held]

    def take_over_hold(self, req: LeaseRequest, now: datetime, within_cap: bool = False) -> bool:
        """A new ladder on a held node takes the node's place at once (it is out already) —
        ``within_cap``: only while the leases stay within the cap. A hold can be over the cap
        (a node left for a person that never had a lease is counted all the same); its next
        ladder disrupts the node again, so it waits like any other: in a pool of 3 at "1" with
        gpu-0 holding the lease and gpu-2 held over the cap, gpu-2's ladder waits for gpu-0's
        release, then takes its hold over."""
        if all(h.node != req.node for h in self.counted_holds):
            return False
        if within_cap and self.node_leases >= self.allowed:
            return False
        self.held = [h for h in self.held if h.node != req.node]
        self.waiting = [w for w in self.waiting if w.holder != req.holder]
        lease = Lease(holder=req.holder, node=req.node, granted_at=now, node_gpus=req.node_gpus)
        self.holders = [*self.holders, lease]
        self.grants += 1
        return True

    def ask(self, report: NodeUnhealthy, now: datetime) -> None:
        """The ladder asks leave to cordon (again: its ask is renewed)."""
        asked = report.model_dump(include={"holder", "node", "pool", "token"})
        ask = CordonAsk(**asked, renewed_at=now)
        self.asking = [a for a in self.asking if a.holder != report.holder] + [ask]

    def forget_old_reports(self, now: datetime) -> None:
        cutoff = now - self.policy.storm_window
        self.unhealthy = {n: t for n, t in self.unhealthy.items() if t >= cutoff}
        kept = self.unhealthy_pools.items()
        self.unhealthy_pools = {n: p for n, p in kept if n in self.unhealthy}
        self.asking = [a for a in self.asking if a.renewed_at >= now - ASK_KEPT_FOR]


def held_by_remedy(nodes: list[NodeFacts], among: set[str] | None = None) -> list[str]:
    """Nodes out of service under remedy's cordon (``among``: only these names)."""
    return sorted(
        n.name
        for n in nodes
        if n.cordoned_by_remedy and n.unschedulable and (among is None or n.name in among)
    )


class NodeUnhealthy(BaseModel):
    """A ladder began on a node (the storm breaker counts them)."""

    node: str
    pool: str
    task_queue: str
    at: datetime
    # The ladder's workflow id when it also asks leave to cordon (remedy.disruption.quarantine):
    # empty
    # from ladders before the breaker held cordons.
    holder: str = ""
    token: str = ""  # what the ladder drew for its ask: the leave carries it back


class UnhealthyReport(NodeUnhealthy):
    """The budget's signal: the report with the pool's size and the controller's policy."""

    pool_size: int
    policy: BudgetPolicy = BudgetPolicy()


class Holders(BaseModel):
    leases: list[Lease]
    held: list[HumanHold] = []  # nodes cordoned by remedy that no running ladder owns
    waiting: list[LeaseRequest] = []  # running ladders waiting for a lease, in the order asked
    waiting_for_human: list[HumanWait] = []  # holders whose ladders wait for an approval
