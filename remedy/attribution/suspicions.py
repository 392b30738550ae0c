"""The job guard's ledger of slow-node suspicions: what the straggler detector said of the job's
nodes (remedy.detection.stragglers), and what became of each suspect.

suspected → proving (the job checkpointed, the node's ladder proves it) → proven (its deep
diagnose found a load fault: the node climbs that fault's ladder) | unproven (it passed:
nothing was done to the node) | expired (not named again for ``expire_after`` before its
turn came). A node the detector calls the application's (its ranks wait for input) is recorded,
never proven. After an unproven suspicion the node is not suspected again for ``quiet``. Pure:
the JobGuard's straggler watch (workflows/job_stragglers.py) acts on it."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel

from remedy.detection.stragglers.models import NodeSuspicion, StragglerPolicy, StragglerReport

KEPT = 50  # ended suspicions kept in the ledger (the newest): the guard's history stays small


class SuspicionState(StrEnum):
    SUSPECTED = "suspected"  # named by the detector; waits for its turn to be proven
    PROVING = "proving"  # the node's ladder runs its proving rung
    PROVEN = "proven"  # the deep diagnose found a fault: the node climbs its ladder
    UNPROVEN = "unproven"  # the deep diagnose passed: nothing done to the node
    EXPIRED = "expired"  # not named again before its turn came
    APPLICATION = "application"  # its ranks wait for input: the job's, never the node's


OPEN = (SuspicionState.SUSPECTED, SuspicionState.PROVING)


class SuspicionPolicy(BaseModel):
    # A suspect the detector stopped naming expires this long after it last did (the scan
    # hands a guard its report at least every 15 minutes: two missed).
    expire_after: timedelta = timedelta(minutes=30)
    # After an unproven (or proven) suspicion, the node is not suspected again this long.
    quiet: timedelta = timedelta(hours=1)
    # How often the guard asks the node's ladder how the proof goes.
    ladder_poll: timedelta = timedelta(minutes=1)
    # How the scan's detector judges the job's step times (handed to it with the guard's policy).
    stragglers: StragglerPolicy = StragglerPolicy()


class Suspicion(BaseModel):
    node: str
    first_seen: datetime
    last_seen: datetime
    score: float = 1.0  # the detector's: the node's slowest rank, against the job's median
    evidence: str = ""
    state: SuspicionState = SuspicionState.SUSPECTED
    checkpoint: str = ""  # how the job's checkpoint before the proof went
    ladder: str = ""  # the node's ladder (workflow id) that proves it
    ended_at: datetime | None = None
    detail: str = ""  # how it ended (the ladder's word)

    @property
    def open(self) -> bool:
        return self.state in OPEN


def heard(
    suspicions: list[Suspicion], report: StragglerReport, policy: SuspicionPolicy
) -> list[Suspicion]:
    """The ledger once ``report`` is taken in: open suspects renewed, new ones added (unless
    the node is quiet after an ended one), the application's nodes recorded."""
    kept = list(suspicions)
    for s in report.suspects:
        mine = _latest(kept, s.node, application=False)
        if mine is not None and mine.open:
            kept[kept.index(mine)] = _renewed(mine, s, report.at)
        elif not _quiet(mine, report.at, policy):
            kept.append(_new(s, SuspicionState.SUSPECTED, report.at))
    for s in report.application:
        mine = _latest(kept, s.node, application=True)
        if mine is not None:
            kept[kept.index(mine)] = _renewed(mine, s, report.at)
        else:
            kept.append(_new(s, SuspicionState.APPLICATION, report.at))
    return _trimmed(kept)


def expire(suspicions: list[Suspicion], now: datetime, policy: SuspicionPolicy) -> list[Suspicion]:
    """Suspects still waiting for their turn and not named since ``expire_after``: expired,
    at the time they did (the same whenever the guard looks)."""
    out = []
    for s in suspicions:
        ends = s.last_seen + policy.expire_after
        if s.state is SuspicionState.SUSPECTED and ends <= now:
            s = s.model_copy(
                update={
                    "state": SuspicionState.EXPIRED,
                    "ended_at": ends,
                    "detail": f"not named again since {s.last_seen:%m-%d %H:%M}",
                }
            )
        out.append(s)
    return out


def next_expiry(suspicions: list[Suspicion], policy: SuspicionPolicy) -> datetime | None:
    waiting = [s.last_seen for s in suspicions if s.state is SuspicionState.SUSPECTED]
    return min(waiting) + policy.expire_after if waiting else None


def next_to_prove(suspicions: list[Suspicion]) -> Suspicion | None:
    """The suspect to prove now: one at a time per job (a node is slow because another held
    the job back as often as not), the slowest first; None while one is proving."""
    if any(s.state is SuspicionState.PROVING for s in suspicions):
        return None
    waiting = [s for s in suspicions if s.state is SuspicionState.SUSPECTED]
    return min(waiting, key=lambda s: (s.score, s.first_seen)) if waiting else None


def counts(suspicions: list[Suspicion]) -> dict[SuspicionState, int]:
    return {st: sum(1 for s in suspicions if s.state is st) for st in SuspicionState}


def _latest(suspicions: list[Suspicion], node: str, application: bool) -> Suspicion | None:
    mine = [
        s
        for s in suspicions
        if s.node == node and (s.state is SuspicionState.APPLICATION) == application
    ]
    return mine[-1] if mine else None


def _quiet(last: Suspicion | None, at: datetime, policy: SuspicionPolicy) -> bool:
    """The node's last suspicion ended as unproven or proven less than ``quiet`` ago: its
    ladder spoke (an expired one did not)."""
    if last is None or last.ended_at is None:
        return False
    spoke = last.state in (SuspicionState.UNPROVEN, SuspicionState.PROVEN)
    return spoke and at < last.ended_at + policy.quiet


def _new(s: NodeSuspicion, state: SuspicionState, at: datetime) -> Suspicion:
    return Suspicion(
        node=s.node,
        first_seen=at,
        last_seen=at,
        score=s.score,
        evidence=s.evidence,
        state=state,
    )


def _renewed(mine: Suspicion, s: NodeSuspicion, at: datetime) -> Suspicion:
    last = max(mine.last_seen, at)
    return mine.model_copy(update={"last_seen": last, "score": s.score, "evidence": s.evidence})


def _trimmed(suspicions: list[Suspicion]) -> list[Suspicion]:
    ended = [s for s in suspicions if not s.open and s.state is not SuspicionState.APPLICATION]
    drop = {id(s) for s in ended[:-KEPT]}
    return [s for s in suspicions if id(s) not in drop]


class ProofCheck(BaseModel):
    """How is the proof of a suspicion going? Asked of the node's ladder (``ladder``: its
    workflow id)."""

    ladder: str


class ProofSeen(BaseModel):
    """The ladder's word: ``state`` None while it still proves; proven (it took on a fault's
    runbook) or unproven (it ended without one), with what it said."""

    state: SuspicionState | None = None
    detail: str = ""
