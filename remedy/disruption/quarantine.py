"""The quarantine breaker: on a bad day for the fleet, remedy stops taking nodes out of
scheduling — cordons included — instead of making it worse.

Two judgements, both pure; the workflows interpret them:

- **Silence is judged fleet-wide first** (``silence_storm``): many agents silent at once is an
  incident of the agents or the control plane, not of the nodes. The fleet scan starts no
  ``AgentSilent`` ladder for them and raises one alert per storm; a single silent agent still
  gets its ladder.
- **The breaker over cordons** (``breaker_tripped``): each pool's DisruptionBudget, and the
  cluster's (``CLUSTER_POOL``), counts the nodes whose ladders began within the storm window
  and the nodes held for people. Past the share, a ladder asks before its cordon and waits
  (``workflows/quarantine_gate.py``), re-probing on its runbook's clock (``reprobe_every``);
  leases wait too. Nodes already out stay out: the breaker restores nothing. What the breaker
  itself holds — the ladders waiting for leave, the cordoned ones waiting for a lease it does
  not grant — does not count, or a storm it holds could never subside; once it subsides the
  breaker reopens by itself, slowly (``remedy.disruption.slow_start``).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel

from remedy.core.events import EventReason
from remedy.core.models import Frozen
from remedy.detection.node_facts import NodeFacts
from remedy.disruption.budget import CLUSTER_POOL, BudgetState, storm
from remedy.disruption.budget_messages import ASK_AGAIN_EVERY
from remedy.disruption.held_by_people import out_of_scheduling
from remedy.runbook import Runbook

NAMED = 20  # nodes an alert or a summary names; the counts say how many there are
REPROBE_AT_MOST_EVERY = timedelta(seconds=1)  # a held ladder's re-probe, however fast its clock


class CordonLeave(Frozen):
    """A budget's word to a ladder that asked: its node may be cordoned."""

    pool: str
    token: str = ""  # the ask's token, carried back (empty: a budget or an ask from before)


class CordonAsked(Frozen):
    """The budgets a ladder asked for leave to cordon (each answers with ``CordonLeave``);
    none when the asks could not be delivered (the ladder goes on as before)."""

    budgets: list[str] = []


class Alert(Frozen):
    """An alert for people: a Kubernetes Event about ``node`` (the one that tipped it)."""

    node: str
    reason: EventReason
    message: str
    warning: bool = True


def out_of_sorts(state: BudgetState, out: bool = False, reopens: bool = False) -> set[str]:
    """The nodes the breaker counts: reported within the window — and with ``out``, the nodes
    held for people (waiting for an approval with their lease, left cordoned for a person):
    the breaker limits the share of the pool that only people can give back, so four nodes
    waiting for people in a pool of ten keep new cordons waiting too.

    ``reopens``: only these. Without (a budget from before), also the ladders it held past
    the window and every node out of scheduling (working leases, cordoned waiters whose grants
    it held): what it held kept it tripped, and the default demo's breaker never closed by
    itself."""
    if not reopens:
        sick = set(state.unhealthy) | {a.node for a in state.asking}
        return sick | (set(out_of_scheduling(state)) - set(state.accepted_out)) if out else sick
    sick = set(state.unhealthy)
    return sick | (held_for_people(state) - set(state.accepted_out)) if out else sick


def held_for_people(state: BudgetState) -> set[str]:
    """Out of scheduling until a person answers: holders waiting for an approval, nodes left
    cordoned for a person (their share given back or not)."""
    waiting = {w.node for w in state.waiting_for_human if w.since is not None}
    return waiting | {h.node for h in state.held}


def reprobe_every(runbook: Runbook | None) -> timedelta:
    """How often a ladder the breaker holds re-probes its node: on its runbook's clock — its
    recheck, else its tolerance, else its verification watch — and at least every
    ``ASK_AGAIN_EVERY``. A 2 s thermal transient (thermal: recheck every minute; the demo's,
    every second) ends ``cleared`` at its next re-probe, not minutes later."""
    if runbook is None:
        return ASK_AGAIN_EVERY
    clock = runbook.recheck_every or runbook.tolerance or runbook.watch
    return max(REPROBE_AT_MOST_EVERY, min(clock, ASK_AGAIN_EVERY))


def accept_what_is_out(state: BudgetState) -> None:
    """An operator resumed the breaker: the nodes out of scheduling now, and those about to be
    cordoned, are what they accepted — counted again only once the breaker trips anew."""
    state.accepted_out = sorted(set(out_of_scheduling(state)) | {a.node for a in state.asking})


def breaker_tripped(
    state: BudgetState, out: bool = False, extra: int = 0, reopens: bool = False
) -> bool:
    """Whether the budget's breaker holds cordons and leases now.

    A pool: more than ``storm_share`` of it out of sorts, at least ``storm_min_nodes`` — in a
    pool of 10 at 20 %, 3 nodes trip it and 2 do not (Karpenter's node repair stops past 20 %
    of a NodePool; NVSentinel's breaker, past a share of the cluster in a window).

    The cluster (``CLUSTER_POOL``, on with ``cluster_share``): more than that share of the whole
    fleet, from more than one pool — a storm confined to one pool is that pool's breaker's, so
    a cluster of one pool never trips twice. 5 pools of 10 at 20 %: 11 nodes across 2 or more
    pools trip it. ``extra``: that many more unhealthy nodes, each of a pool not counted yet
    (would they trip it?). ``reopens``: as ``out_of_sorts``."""
    policy, sick = state.policy, len(out_of_sorts(state, out, reopens)) + extra
    if state.pool != CLUSTER_POOL:
        return storm(sick, state.pool_size, policy.storm_share, policy.storm_min_nodes)
    if policy.cluster_share is None:
        return False
    pools = {state.unhealthy_pools.get(n, "") for n in state.unhealthy}
    pools |= set() if reopens else {a.pool for a in state.asking}
    return len(pools) + min(extra, 1) > 1 and storm(
        sick, state.pool_size, policy.cluster_share, policy.storm_min_nodes
    )


class BreakerState(StrEnum):
    """A breaker as its budget publishes it where a cordon can read it cheaply
    (``remedy.scan.cluster.BreakerBoard``): a ladder's first cordon, and a node's agent, go at once
    only while it is closed; else they ask the budget first and wait for its leave."""

    CLOSED = "closed"
    NEAR = "near"  # one more unhealthy node would trip it
    TRIPPED = "tripped"


class BreakerNotice(Frozen):
    pool: str
    state: BreakerState


def published_state(state: BudgetState, out: bool = False) -> BreakerState:
    """What the budget publishes. NEAR, not CLOSED, one node before it trips: a cordon that
    went without asking can only be counted after it, so the node that would tip the breaker
    asks first, as every ladder once did. In a pool of 10 at 20 %: 1 node out of sorts is
    CLOSED, 2 are NEAR (a third would trip it), 3 are TRIPPED. What slips past is only what
    is in flight: cordons that read CLOSED before the budget counted the reports before them
    and published (bounded by the reports that reach the pool within that latency). NEAR too
    while it reopens slowly (``remedy.disruption.slow_start``): new cordons wait behind the held
    ones."""
    if state.tripped:
        return BreakerState.TRIPPED
    if state.slow_start:
        return BreakerState.NEAR
    return BreakerState.NEAR if breaker_tripped(state, out, extra=1) else BreakerState.CLOSED


def over_note(state: BudgetState, now: datetime, out: bool, reopens: bool) -> str:
    """The breaker closed by itself: when, and how many it counts still."""
    sick = len(out_of_sorts(state, out, reopens))
    return f"storm over at {now.isoformat()}: {sick} unhealthy" + (
        "; the breaker closed by itself" if reopens else ""
    )


def over_alert(state: BudgetState) -> Alert:
    """The Event when the breaker closes by itself with cordons held: they go on (slowly,
    one first, while ``remedy.disruption.slow_start`` runs)."""
    slowly = ", one first, then one more as each proves real" if state.slow_start else ""
    return Alert(
        node=min(a.node for a in state.asking),
        reason=EventReason.QUARANTINE_OVER,
        message=f"{scope(state.pool)}: {state.breaker_note}; held cordons go on{slowly}",
        warning=False,
    )


def forget_recovered(state: BudgetState, holder: str, node: str = "") -> None:
    """The holder's ladder ended with its node back in service (or gone): no longer unhealthy
    now, so the breaker stops counting and naming it (a held ladder whose node probed clean,
    a leased one that recovered)."""
    nodes = {lease.node for lease in state.holders if lease.holder == holder}
    nodes |= {a.node for a in state.asking if a.holder == holder} | ({node} if node else set())
    state.unhealthy = {n: at for n, at in state.unhealthy.items() if n not in nodes}


def scope(pool: str) -> str:
    return "the cluster" if pool == CLUSTER_POOL else f"pool {pool}"


def trip_note(state: BudgetState, out: bool = False, reopens: bool = False) -> str:
    """Why it is tripped, naming the nodes it counts (``reopens``: said afresh each round, so
    a node that recovered leaves it)."""
    sick = out_of_sorts(state, out, reopens)
    held = " or held for people" if reopens else " or out of scheduling"
    within = f"within {state.policy.storm_window}" + (held if out else "")
    return (
        f"storm: {len(sick)} of {state.pool_size} nodes unhealthy {within} "
        f"({_names(sorted(sick))}); no node is taken out of "
        f"service: cordons and disruptive work wait"
    )


def trip_alert(state: BudgetState) -> Alert:
    """One Event when the breaker trips, about the node reported last."""
    newest = max(state.unhealthy, key=lambda n: state.unhealthy[n], default="")
    node = newest or min(out_of_sorts(state), default="")
    return Alert(
        node=node,
        reason=EventReason.QUARANTINE,
        message=f"{scope(state.pool)}: {state.breaker_note}. Resumes when the storm subsides, "
        f"or: remedy resume-pool {state.pool}",
    )


def silence_storm(
    nodes: list[NodeFacts],
    silent: list[NodeFacts],
    share: float,
    min_nodes: int,
    now: datetime,
    before: SilenceStorm | None = None,
) -> SilenceStorm | None:
    """Whether the silent agents are an incident rather than faults of their nodes (None: they
    are faults; each gets its ladder).

    Fleet-wide first: 20 of 20 managed nodes silent, or 5 of 20 at a 20 % share, is the whole
    fleet's storm, and no silent node gets a ladder. Else pool by pool: 3 silent in a pool of 10
    at 20 % is that pool's storm, while one silent agent in a pool of 4 is a fault (it takes at
    least ``min_nodes``). ``before``: the last scan's storm — the same storm goes on (since
    then) and is not alerted again."""
    if not silent:
        return None
    managed = [n for n in nodes if n.managed]
    fleet_wide = storm(len(silent), len(managed), share, min_nodes)
    quiet, size = Counter(n.pool for n in silent), Counter(n.pool for n in managed)
    pools = sorted(p for p in quiet if fleet_wide or storm(quiet[p], size[p], share, min_nodes))
    if not pools:
        return None
    withheld = sorted(n.name for n in silent if n.pool in pools)
    return SilenceStorm(
        since=before.since if before else now,
        fleet_wide=fleet_wide,
        pools=pools,
        silent=len(withheld),
        of=len(managed) if fleet_wide else sum(size[p] for p in pools),
        nodes=withheld[:NAMED],
    )


def silence_alert(storm_now: SilenceStorm) -> Alert:
    return Alert(
        node=storm_now.nodes[0], reason=EventReason.AGENTS_SILENT, message=storm_now.note()
    )


def silence_over(before: SilenceStorm, now: datetime) -> Alert:
    return Alert(
        node=before.nodes[0],
        reason=EventReason.AGENTS_SILENT_OVER,
        message=f"agents heartbeat again (silent since {before.since:%Y-%m-%d %H:%M:%S}Z, "
        f"over at {now:%H:%M:%S}Z): silent nodes get their AgentSilent ladders again",
        warning=False,
    )


def _names(nodes: list[str]) -> str:
    more = f", and {len(nodes) - NAMED} more" if len(nodes) > NAMED else ""
    return ", ".join(nodes[:NAMED]) + more


class SilenceStorm(BaseModel):
    """Many agents silent at once (remedy.disruption.quarantine.silence_storm): an incident of the
    agents
    or the control plane. Their nodes get no AgentSilent ladder while it lasts."""

    since: datetime  # the first scan that saw it (carried from scan to scan)
    fleet_wide: bool  # judged on the whole fleet (else on the pools named)
    pools: list[str]
    silent: int  # silent nodes withheld from ladders
    of: int  # managed nodes they are counted against
    nodes: list[str] = []  # the first few, by name

    def note(self) -> str:
        where = "fleet-wide" if self.fleet_wide else f"in pool {', '.join(self.pools)}"
        unnamed = self.silent - len(self.nodes)
        more = f", and {unnamed} more" if unnamed > 0 else ""
        return (
            f"{self.silent} of {self.of} agents silent {where} since "
            f"{self.since:%Y-%m-%d %H:%M:%S}Z: an agent or control-plane incident, not a fault "
            f"of the nodes; no AgentSilent ladder, nothing cordoned ({', '.join(self.nodes)}{more})"
        )
