"""The detector's figures over played episodes, per policy: time to culprit, precision, recall,
false suspects per job-day, input skew blamed, and what slowness cost with and without it."""

from __future__ import annotations

from pydantic import BaseModel

from twin.slow_episodes import Played
from twin.slowness import cost

DAY = 24 * 60  # minutes
# Recall per band of slowdown: a 5 % node hides among ranks that differ by a percent or two.
BANDS = [(0.05, 0.10), (0.10, 0.20), (0.20, 0.50)]


def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile, nearest rank; None when there is nothing to rank."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


class PolicyFigures(BaseModel):
    policy: str
    episodes: int
    job_days: float
    faults: int
    found: int  # slow faults named before they ended or the episode did
    swapped: int  # proven and swapped out
    ttc_median_min: float | None
    ttc_p90_min: float | None
    namings: int
    true_namings: int
    top_namings: int  # namings of a report's first suspect
    true_top_namings: int
    false_per_job_day: float
    recall_by_band: dict[str, float | None]
    skews: int
    skews_blamed: int
    skews_called_application: int
    cost_per_fault_min: float  # whole-job minutes, with a spare
    cost_per_fault_no_spare_min: float
    slow_per_fault_min: float  # of which the node slow in the job

    @property
    def precision(self) -> float | None:
        return share(self.true_namings, self.namings)

    @property
    def top1_precision(self) -> float | None:
        return share(self.true_top_namings, self.top_namings)

    @property
    def recall(self) -> float | None:
        return share(self.found, self.faults)


def _found(p: Played) -> bool:
    """Named while the fault lasted, within the episode."""
    return p.fault is not None and p.found is not None and p.found < p.fault.ends(p.minutes)


def figures(played: list[Played], nodes: int) -> PolicyFigures:
    with_fault = [p for p in played if p.fault is not None]
    found = [p for p in with_fault if _found(p)]
    ttc = [float(p.time_to_culprit) for p in found if p.time_to_culprit is not None]
    namings = [n for p in played for n in p.namings]
    tops = [n for n in namings if n.top]
    job_days = sum(p.minutes for p in played) / DAY
    costs = [p.cost for p in with_fault if p.cost is not None]
    no_spare = [cost(p.fault, p.swapped, nodes, spare=False) for p in with_fault if p.fault]
    per_fault = sum(c.total for c in costs) / len(costs) if costs else 0.0
    bands = {}
    for low, high in BANDS:
        band = [p for p in with_fault if p.fault and low <= p.fault.factor < high]
        bands[f"{low:.0%}-{high:.0%}"] = share(sum(_found(p) for p in band), len(band))
    return PolicyFigures(
        policy=played[0].policy if played else "",
        episodes=len(played),
        job_days=job_days,
        faults=len(with_fault),
        found=len(found),
        swapped=sum(p.swapped is not None for p in with_fault),
        ttc_median_min=quantile(ttc, 0.5),
        ttc_p90_min=quantile(ttc, 0.9),
        namings=len(namings),
        true_namings=sum(n.true for n in namings),
        top_namings=len(tops),
        true_top_namings=sum(n.true for n in tops),
        false_per_job_day=sum(not n.true for n in namings) / job_days if job_days else 0.0,
        recall_by_band=bands,
        skews=sum(p.skews for p in played),
        skews_blamed=sum(p.skews_blamed for p in played),
        skews_called_application=sum(p.skews_called_application for p in played),
        cost_per_fault_min=per_fault,
        cost_per_fault_no_spare_min=sum(c.total for c in no_spare) / len(no_spare)
        if no_spare
        else 0.0,
        slow_per_fault_min=sum(c.slow for c in costs) / len(costs) if costs else 0.0,
    )
