"""Limits on disruption: how many nodes of a pool may be disrupted at once, and the storm
breaker that stops disruptive work when too much of a pool looks sick at once.

Pure functions and the budget's state; the DisruptionBudget workflow interprets them.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, field_validator

from remedy.models import Wraps

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

    @field_validator("max_disruption")
    @classmethod
    def _parses(cls, value: str) -> str:
        allowed_disruptions(value, 1)
        return value


class LeaseWanted(BaseModel):
    """A ladder asks for a lease (the activity adds what only the controller knows)."""

    holder: str  # the NodeRemediation workflow id
    node: str
    pool: str
    task_queue: str  # where the budget workflow runs


class LeaseRequest(LeaseWanted):
    """The budget's signal: the request with the pool's size and the controller's policy."""

    pool_size: int
    policy: BudgetPolicy = BudgetPolicy()


class LeaseGrant(Wraps):
    """The budget tells a ladder its lease is granted."""

    pool: str


class Lease(BaseModel):
    holder: str
    node: str
    granted_at: datetime


class LeaseRelease(BaseModel):
    holder: str


class NodeUnhealthy(BaseModel):
    """A ladder began on a node (the storm breaker counts them)."""

    node: str
    pool: str
    task_queue: str
    at: datetime


class UnhealthyReport(NodeUnhealthy):
    """The budget's signal: the report with the pool's size and the controller's policy."""

    pool_size: int
    policy: BudgetPolicy = BudgetPolicy()


class HolderCheck(Wraps):
    """Which of these lease holders' workflows have closed?"""

    workflow_ids: list[str]


class ClosedHolders(Wraps):
    workflow_ids: list[str]


class PoolHolders(BaseModel):
    """Which running ladders of the pool hold a lease (a budget run starting afresh asks)."""

    pool: str


class Holders(BaseModel):
    leases: list[Lease]


class ResumeRequest(BaseModel):
    by: str


class BudgetState(BaseModel):
    pool: str
    policy: BudgetPolicy = BudgetPolicy()
    pool_size: int = 0
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

    @property
    def allowed(self) -> int:
        return allowed_disruptions(self.policy.max_disruption, self.pool_size)

    def forget_old_reports(self, now: datetime) -> None:
        cutoff = now - self.policy.storm_window
        self.unhealthy = {n: t for n, t in self.unhealthy.items() if t >= cutoff}


def peak_concurrency(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals (lease granted → released) that overlap at any moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    held = peak = 0
    for _, step in edges:
        held += step
        peak = max(peak, held)
    return peak
