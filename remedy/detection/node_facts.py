"""One node as the cluster says it is: what the fleet scan, the budget and the breaker read."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from remedy.detection.conditions import NodeCondition


class NodeFacts(BaseModel):
    """One node, read from the cluster."""

    model_config = ConfigDict(frozen=True)

    name: str
    pool: str
    managed: bool = True  # False: opted out of remedy; never acted on
    unschedulable: bool = False
    cordoned_by_remedy: bool = False
    agent_cordoned_at: datetime | None = None  # remedy's cordon, written by the node's agent
    problems: list[NodeCondition] = []  # conditions whose status is "True" (a problem)
    awaiting_admission: bool = False  # carries the admission taint
    validated: bool = False
    rejected: str | None = None  # why admission rejected it
    active_check: NodeCondition | None = None  # its GpuActiveCheck (remedy/scan/active_checks.py)
    # The agent's heartbeat as it wrote it (its node's clock; None: it never wrote one), and
    # what the scan judges of it on the controller's clock (``judge_liveness``): how long it
    # has not changed, and how far the node's clock is off (None: not known yet).
    last_heartbeat: datetime | None = None
    silent_for: timedelta | None = None
    clock_skew: timedelta | None = None
    gpus_out: list[int] = []  # GPUs remedy quarantined (scope: gpu); the node stays schedulable
    held_for_person: bool = False  # an abort held it (remedy.trust.person_hold): said in status
    # Another repairer at work on it (Karpenter's repair or disruption, a deletion): who and
    # what, as its marks say (adapters/kubernetes/repairers.py). remedy leaves it alone.
    other_repairer: str | None = None
