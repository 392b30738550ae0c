"""The eight experiments: what each sets in the fleet file's knobs, which faults it injects,
what it does to the processes while the ladders climb, and what it does after."""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos import disturb
from chaos.config import FAULTS, Size
from chaos.disturb import Disturb
from chaos.knobs import Knobs


@dataclass(frozen=True)
class Experiment:
    key: str
    title: str
    knobs: Knobs = field(default_factory=Knobs)
    faults: dict[str, float] = field(default_factory=lambda: dict(FAULTS))
    disturb: Disturb | None = None
    # Runs to its own end (a count of outages) rather than until the last fault is reported.
    finite: bool = False
    after: Disturb | None = None  # once every ladder ended
    copies: bool = False  # each fault reported Size.reports times at once
    # Size.budget_at_rest applies: no more ladders than the cap at once.
    budget: bool = False

    def in_flight(self, size: Size, cap: int) -> int:
        return cap if self.budget and size.budget_at_rest else size.in_flight

    def reports(self, size: Size) -> int:
        return size.reports if self.copies else 1


EXPERIMENTS = [
    Experiment(
        "a",
        "controller and agents SIGKILLed mid-ladder, restarted after 1-4 s",
        knobs=Knobs(answer_delay_s=0.5),
        disturb=disturb.kill_workers,
    ),
    Experiment(
        "b",
        "the agent dies right after every reboot's effect (its answer never comes)",
        knobs=Knobs(die_after=["reboot"]),
        faults={"gpu_lost": 1.0},
    ),
    Experiment(
        "c",
        "dev server SIGKILLed right after an effect, down 12-20 s, restarted on its SQLite file",
        knobs=Knobs(answer_delay_s=1.0),
        disturb=disturb.stop_server,
        finite=True,
    ),
    Experiment(
        "d",
        "answer lost after the effect, p = 0.3",
        knobs=Knobs(lose_answer_p=0.3),
    ),
    Experiment(
        "e",
        "transient error before the effect, p = 0.3",
        knobs=Knobs(fail_before_p=0.3),
    ),
    Experiment(
        "f",
        "cluster API down (every cluster call fails)",
        disturb=disturb.api_down,
        finite=True,
    ),
    Experiment(
        "g",
        "the pool's DisruptionBudget terminated while leases are held",
        disturb=disturb.terminate_budget,
        budget=True,
    ),
    Experiment(
        "h",
        "identical reports many times per node: at once, during the ladder, after it ended",
        disturb=disturb.duplicate_reports,
        after=disturb.stale_reports,
        copies=True,
    ),
]
BY_KEY = {e.key: e for e in EXPERIMENTS}
