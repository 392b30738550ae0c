"""What the chaos harness asks of the simulated world, kept in the fleet file beside the fleet
so that every process obeys it: answers lost after the effect, calls failing before it, the
cluster API down until a wall-clock time, a process that dies right after an effect lands, and
answers that take a while (the window in which a crash loses them). And the tally of what came
of it."""

from __future__ import annotations

import random
from datetime import datetime

from pydantic import BaseModel

# What the probabilistic knobs hit, as the simulator records actions: every call that changes
# the node (cordon and restore as well as the disruptive rungs).
MUTATING = ["cordon", "restore", "drain", "kill_job", "reset_gpu", "reboot", "replace"]


class Knobs(BaseModel):
    seed: int = 0
    draws: int = 0  # how many random draws were made so far, by any process
    actions: list[str] = MUTATING
    lose_answer_p: float = 0.0  # the answer is lost after the effect landed
    fail_before_p: float = 0.0  # the call fails before any effect
    api_down_until: datetime | None = None  # every cluster call fails until then
    die_after: list[str] = []  # a new effect of these kills the process that made it
    answer_delay_s: float = 0.0  # a new effect's answer comes this much later

    def api_down(self, now: datetime) -> bool:
        return self.api_down_until is not None and now < self.api_down_until

    def chance(self, p: float) -> bool:
        """A draw from the run's one random sequence (seeded, counted in the file): the same
        seed and the same order of calls give the same faults."""
        if p <= 0.0:
            return False
        draw = random.Random(f"{self.seed}/{self.draws}").random()
        self.draws += 1
        return draw < p

    def calm(self) -> Knobs:
        """The same run with nothing going wrong any more."""
        return Knobs(seed=self.seed, draws=self.draws, actions=self.actions)


class Tally(BaseModel):
    """What the knobs did, and how the retries they caused were answered, counted across
    processes in the fleet file."""

    failed_before: int = 0
    answers_lost: int = 0
    api_refused: int = 0
    deaths: int = 0  # processes killed right after an effect
    slow_answers: int = 0
    # A keyed action asked again after its effect landed, answered from the ledger without
    # acting again: the retry that exactly-once is for.
    repeats: int = 0

    def lines(self) -> list[str]:
        said = {
            "calls failed before the effect": self.failed_before,
            "answers lost after the effect": self.answers_lost,
            "cluster calls refused (API down)": self.api_refused,
            "processes died after an effect": self.deaths,
            "retries answered from the ledger": self.repeats,
        }
        return [f"{n} {what}" for what, n in said.items() if n]
