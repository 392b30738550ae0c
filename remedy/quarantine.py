"""The quarantine breaker: on a bad day for the fleet, remedy stops taking nodes out of
scheduling — cordons included — instead of making it worse.

Two judgements, both pure; the workflows interpret them:

- **Silence is judged fleet-wide first** (``silence_storm``): many agents silent at once is an
  incident of the agents or the control plane, not of the nodes. The fleet scan starts no
  ``AgentSilent`` ladder for them and raises one alert per storm; a single silent agent still
  gets its ladder.
- **The breaker over cordons** (``breaker_tripped``): each pool's DisruptionBudget, and the
  cluster's (``CLUSTER_POOL``), counts the nodes whose ladders began within the storm window
  and those whose ladders wait for leave to cordon. Past the share, a ladder asks before its
  cordon and waits (``workflows/quarantine_gate.py``); leases wait too. Nodes already out stay
  out: the breaker restores nothing.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from enum import StrEnum

from remedy.budget import CLUSTER_POOL, BudgetState, storm
from remedy.fleet import NodeFacts, SilenceStorm
from remedy.held_by_people import out_of_scheduling
from remedy.models import Frozen

QUARANTINE_EVENT = "RemedyQuarantine"  # the breaker tripped: cordons wait
QUARANTINE_OVER_EVENT = "RemedyQuarantineOver"
SILENCE_EVENT = "RemedyAgentsSilent"  # a silence storm: no AgentSilent ladders
SILENCE_OVER_EVENT = "RemedyAgentsSilentOver"
NAMED = 20  # nodes an alert or a summary names; the counts say how many there are


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
    reason: str
    message: str
    warning: bool = True


def out_of_sorts(state: BudgetState, out: bool = False) -> set[str]:
    """The nodes the breaker counts: reported within the window, or still waiting to be
    cordoned (a held node is no less unhealthy for the window having passed) — and with
    ``out``, every node the budget knows is out of scheduling (leased, held for a person,
    cordoned and waiting for a lease): the breaker limits the pool's unschedulable share, so
    four nodes waiting for people in a pool of ten keep new cordons waiting too."""
    sick = set(state.unhealthy) | {a.node for a in state.asking}
    return sick | (set(out_of_scheduling(state)) - set(state.accepted_out)) if out else sick


def accept_what_is_out(state: BudgetState) -> None:
    """An operator resumed the breaker: the nodes out of scheduling now, and those about to be
    cordoned, are what they accepted — counted again only once the breaker trips anew."""
    state.accepted_out = sorted(set(out_of_scheduling(state)) | {a.node for a in state.asking})


def breaker_tripped(state: BudgetState, out: bool = False, extra: int = 0) -> bool:
    """Whether the budget's breaker holds cordons and leases now.

    A pool: more than ``storm_share`` of it out of sorts, at least ``storm_min_nodes`` — in a
    pool of 10 at 20 %, 3 nodes trip it and 2 do not (Karpenter's node repair stops past 20 %
    of a NodePool; NVSentinel's breaker, past a share of the cluster in a window).

    The cluster (``CLUSTER_POOL``, on with ``cluster_share``): more than that share of the whole
    fleet, from more than one pool — a storm confined to one pool is that pool's breaker's, so
    a cluster of one pool never trips twice. 5 pools of 10 at 20 %: 11 nodes across 2 or more
    pools trip it. ``extra``: that many more unhealthy nodes, each of a pool not counted yet
    (would they trip it?)."""
    policy, sick = state.policy, len(out_of_sorts(state, out)) + extra
    if state.pool != CLUSTER_POOL:
        return storm(sick, state.pool_size, policy.storm_share, policy.storm_min_nodes)
    if policy.cluster_share is None:
        return False
    pools = {state.unhealthy_pools.get(n, "") for n in state.unhealthy}
    pools |= {a.pool for a in state.asking}
    return len(pools) + min(extra, 1) > 1 and storm(
        sick, state.pool_size, policy.cluster_share, policy.storm_min_nodes
    )


class BreakerState(StrEnum):
    """A breaker as its budget publishes it where a cordon can read it cheaply
    (``remedy.cluster.BreakerBoard``): a ladder's first cordon, and a node's agent, go at once
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
    and published (bounded by the reports that reach the pool within that latency)."""
    if state.tripped:
        return BreakerState.TRIPPED
    return BreakerState.NEAR if breaker_tripped(state, out, extra=1) else BreakerState.CLOSED


def scope(pool: str) -> str:
    return "the cluster" if pool == CLUSTER_POOL else f"pool {pool}"


def trip_note(state: BudgetState, out: bool = False) -> str:
    sick = out_of_sorts(state, out)
    within = f"within {state.policy.storm_window}" + (" or out of scheduling" if out else "")
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
        reason=QUARANTINE_EVENT,
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
    return Alert(node=storm_now.nodes[0], reason=SILENCE_EVENT, message=storm_now.note())


def silence_over(before: SilenceStorm, now: datetime) -> Alert:
    return Alert(
        node=before.nodes[0],
        reason=SILENCE_OVER_EVENT,
        message=f"agents heartbeat again (silent since {before.since:%Y-%m-%d %H:%M:%S}Z, "
        f"over at {now:%H:%M:%S}Z): silent nodes get their AgentSilent ladders again",
        warning=False,
    )


def _names(nodes: list[str]) -> str:
    more = f", and {len(nodes) - NAMED} more" if len(nodes) > NAMED else ""
    return ", ".join(nodes[:NAMED]) + more
