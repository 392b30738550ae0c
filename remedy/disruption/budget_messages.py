"""What the disruption budget is sent and answers beyond leases: holds for a person, cordon
asks, holder checks, a resume."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from remedy.core.models import Wraps, signed


class HumanHold(BaseModel):
    """A node a finished ladder left cordoned for a person: out of service, so it counts
    against the pool until remedy's cordon goes (restored, replaced) or an operator releases
    it. The cordon on the node is the durable record: a budget that starts afresh finds it."""

    node: str
    since: datetime
    # False: its share went back to the pool (``on_approval_timeout: release``); the node is
    # out of scheduling all the same (``BudgetState.out_of_scheduling``).
    counted: bool = True
    gpus: int = 0  # the node's GPUs, out with it

    @property
    def holder(self) -> str:
        return HELD_FOR_HUMAN + self.node


class HumanWait(BaseModel):
    """A lease holder's ladder waits for a person (an approval): its lease does nothing until
    someone answers. The ladder's signal, and the budget's record; ``since`` None in the
    signal: it waits no more."""

    holder: str
    node: str
    what: str = ""  # "approval for replace"
    since: datetime | None = None


class HeldCheck(Wraps):
    """Which of these nodes still carry remedy's cordon?"""

    nodes: list[str]


class HeldNodes(Wraps):
    nodes: list[str]


# A ladder held by the breaker asks again this often; an ask not renewed for ASK_KEPT_FOR is
# dropped (its ladder ended or was terminated), so a dead ladder cannot keep a breaker tripped.
ASK_AGAIN_EVERY = timedelta(minutes=5)


ASK_KEPT_FOR = 3 * ASK_AGAIN_EVERY


class CordonAsk(BaseModel):
    """A ladder that waits for leave to cordon (remedy.disruption.quarantine)."""

    holder: str
    node: str
    pool: str
    renewed_at: datetime  # when it last asked (budget time)
    token: str = ""  # the ask's token, for the leave (empty: a ladder from before)


class HolderCheck(Wraps):
    """Which of these lease holders' workflows have closed?"""

    workflow_ids: list[str]


class ClosedHolders(Wraps):
    workflow_ids: list[str]


class PoolHolders(BaseModel):
    """Which running ladders of the pool hold a lease (a budget run starting afresh asks)."""

    pool: str


class ResumeRequest(BaseModel):
    by: str
    identity: str = ""  # the caller's client identity, recorded beside ``by``

    @property
    def who(self) -> str:
        return signed(self.by, self.identity)


class ResumeResult(BaseModel):
    """What closing the breaker did: the note it left and the leases after the grants."""

    pool: str
    note: str
    holders: int
    waiting: int


class HoldReleased(BaseModel):
    """What an operator's release of a node held for a person did: the pool after it (the
    leases granted on the share it freed included)."""

    pool: str
    node: str
    held: list[str]  # the nodes still held for a person
    holders: int
    waiting: int


HELD_FOR_HUMAN = "held-for-human/"  # the holder of a hold: "held-for-human/<node>"
