"""What a chaos run is made of: the runbooks (the shipped ones, scaled so a ladder takes
seconds), the pool's budget, the faults injected, and the two sizes of the run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.hardware import BlocklistPolicy
from remedy.runbook import Match, Runbook, RunbookSet, Rung, load_runbooks

ROOT = Path(__file__).resolve().parent.parent
MAX_DISRUPTION = "20%"  # of the pool: the cap the experiments check
# Which faults the harness injects, and how often. No shipped runbook climbs kill_job, so an
# Xid 62 (micro-controller halt) gets the chaos runbook below: kill the job, then reset.
FAULTS = {"ecc_dbe": 0.35, "gpu_lost": 0.3, "mcu_halt": 0.25, "remap_failure": 0.1}
KILL_JOB_RUNBOOK = Runbook(
    name="chaos-kill-job-then-reset",
    description="Chaos only: the one shipped action no shipped runbook climbs.",
    match=[Match(xids=[62])],
    priority=10,
    cordon=True,
    tolerance=timedelta(0),
    ladder=[
        Rung(action=Action.KILL_JOB, timeout=timedelta(minutes=10), verify=False),
        Rung(action=Action.RESET_GPU, timeout=timedelta(minutes=5), settle=timedelta(seconds=30)),
    ],
)


def runbooks(speedup: float) -> RunbookSet:
    shipped = load_runbooks([ROOT / "runbooks"])
    # Faults land on random GPUs independently: one that hits a GPU again soon after its
    # recovery is chance, not a recovery that did not hold; every ladder starts from the bottom.
    independent = [
        r.model_copy(update={"recurrence_window": timedelta(0)})
        for r in [*shipped, KILL_JOB_RUNBOOK]
    ]
    return RunbookSet(r.scaled(speedup) for r in independent)


def blocklist_policy() -> BlocklistPolicy:
    """Never in practice: faults land on random GPUs, so a GPU hit three times is chance, not a
    repeat offender, and its take-out ladder would wait for an approval nobody gives here."""
    return BlocklistPolicy(max_incidents=1_000_000)


def budget_policy(speedup: float) -> BudgetPolicy:
    """The default budget with its clocks scaled like the runbooks'. The storm breaker is off
    (a share of 1: never more unhealthy nodes than the pool has): the experiments keep many
    ladders going at once on purpose, and what they check is the cap."""
    default = BudgetPolicy()
    return BudgetPolicy(
        max_disruption=MAX_DISRUPTION,
        storm_share=1.0,
        storm_window=default.storm_window / speedup,
        reclaim_every=default.reclaim_every / speedup,
    )


@dataclass(frozen=True)
class Size:
    name: str
    # Runbook time: at 60x a 30-minute drain timeout is 30 s, a 2-minute settle 2 s.
    speedup: float
    ladders: int  # faults injected per experiment (each one ladder)
    in_flight: int  # ladders running at once, at most (more than the cap: some wait)
    nodes: int  # in the pool; the cap is MAX_DISRUPTION of it
    at_once: int  # experiments side by side (each has its own dev server and workers)
    kill_gap_s: tuple[float, float]  # (a): from a restart to the next kill
    outage_s: tuple[float, float]  # (c): how long the dev server stays down
    outages: int  # (c): how many times
    api_down_s: float  # (f): how long the cluster API is down
    api_outages: int  # (f): how many times
    budget_gap_s: tuple[float, float]  # (g): between terminations of the budget
    # (g): terminate the budget only at rest (every lease it holds granted and known to its
    # ladder, nobody waiting; no more ladders than the cap). A grant still on its way when
    # the budget is terminated is lost, and its ladder asks again only after REASK_EVERY
    # (five minutes, not scaled with the runbooks): longer than the short run may take.
    budget_at_rest: bool
    settle_s: float  # after the last fault, how long ladders may take before they are stuck
    reports: int  # (h): identical reports per node, each time
    # (h): duplicates at any moment of a ladder, also as it completes. A report that arrives
    # then starts a new ladder on the healthy node (a race in activities/starts.py, reported
    # in chaos.md); the short run, a test that must pass, sends them on the first rung only.
    racy_duplicates: bool


SHORT = Size(
    name="short",
    speedup=120.0,
    ladders=4,
    in_flight=4,
    nodes=10,
    at_once=8,
    kill_gap_s=(0.5, 2.0),
    outage_s=(12.0, 14.0),
    outages=1,
    api_down_s=12.0,
    api_outages=1,
    budget_gap_s=(2.0, 4.0),
    budget_at_rest=True,
    settle_s=150.0,
    reports=8,
    racy_duplicates=False,
)
FULL = Size(
    name="full",
    speedup=60.0,
    ladders=100,
    in_flight=8,
    nodes=20,
    at_once=4,
    kill_gap_s=(1.0, 5.0),
    outage_s=(12.0, 20.0),
    outages=5,
    api_down_s=45.0,
    api_outages=4,
    budget_gap_s=(20.0, 40.0),
    budget_at_rest=False,
    # A ladder waiting for a lease from a budget that was terminated asks again after five
    # minutes (workflows/disruption_lease.py REASK_EVERY): the deadline is past that.
    settle_s=480.0,
    reports=20,
    racy_duplicates=True,
)
