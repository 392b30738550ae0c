"""The quarantine breaker reopens by itself (issue 52): what it holds does not keep it tripped,
it names the nodes unhealthy now, and once the storm subsides it lets the cordons it held go
one first, then more as each proves real (remedy.disruption.slow_start). Real ladders on the
time-skipping server; the slow start's arithmetic as pure functions."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.core.models import Action
from remedy.disruption import slow_start
from remedy.disruption.blocking import breaker
from remedy.disruption.budget import CLUSTER_POOL, BudgetState
from remedy.disruption.budget_messages import CordonAsk
from remedy.disruption.quarantine import reprobe_every
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from tests.breakers import published
from tests.conftest import Queues, running_workers
from tests.ladder import Handle, state_of, wait_for_phase
from tests.test_disruption_budget import budget_state
from tests.test_quarantine import HOLDS, POLICY, T0, _sick

# A fault that is real: still there when its 40-minute tolerance ends; a drain and a reset fix it.
REAL = Runbook(
    name="reset-when-real",
    match=Match(xids=[48]),
    tolerance=timedelta(minutes=40),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
)

# Tolerated for 10 minutes, re-probed every minute (the shipped thermal runbook's clock).
RECHECKS = REAL.model_copy(
    update={
        "name": "recheck-every-minute",
        "tolerance": timedelta(minutes=10),
        "recheck_every": timedelta(minutes=1),
    }
)


async def test_the_breaker_reopens_by_itself_though_it_holds_three_cordons(
    time_env: WorkflowEnvironment,
) -> None:
    """Two nodes cordoned, then three more go bad: the breaker holds their three cordons. Once
    the reports leave the 30-minute window it closes by itself (before, the three it held kept
    it tripped until `remedy resume-pool`), lets one cordon go, and the other two once that
    one proved real (its ladder asked for a lease); the three resets fix their nodes."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    names = sorted(fleet.nodes)[:5]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _storm(time_env, queues, fleet, [HOLDS, HOLDS, REAL, REAL, REAL])
        tripped = await budget_state(time_env.client, queues.pool)
        await time_env.sleep(timedelta(minutes=35))  # the storm's reports leave the window
        reopening = await budget_state(time_env.client, queues.pool)
        assert not reopening.tripped and reopening.trips == 1  # before: tripped until resumed
        held = [await state_of(h) for h in handles[2:]]
        cordoned_then = [n for n in names[2:] if fleet.node(n).unschedulable]
        ended = [await h.result() for h in handles[2:]]  # the first proved real: all three go
        closed = await budget_state(time_env.client, queues.pool)
    # While tripped, its note names the five nodes unhealthy now, not the three of the trip.
    assert tripped.tripped and "5 of 10 nodes unhealthy" in tripped.breaker_note
    assert all(n in tripped.breaker_note for n in names)
    # The admitted ladder may be asking again for a moment (its renewed ask crossed the leave,
    # and may carry a new token: it is what gets it a leave it can take): held are the others.
    admitted = {a.holder for a in reopening.admitted}
    held_asks = [a for a in reopening.asking if a.holder not in admitted]
    assert (reopening.slow_start, len(admitted), len(held_asks)) == (1, 1, 2)
    assert "reopening: 1 cordon at a time (1 admitted, 2 held)" in breaker(reopening)
    assert len(cordoned_then) == 1
    assert sorted(s.phase for s in held) == sorted(
        [Phase.TOLERATING, Phase.HELD_BY_BREAKER, Phase.HELD_BY_BREAKER]
    )
    assert [r.outcome for r in ended] == [Outcome.RECOVERED] * 3
    assert all((n, "reset_gpu") in fleet.actions for n in names[2:])
    assert not closed.tripped and closed.trips == 1
    assert (closed.slow_start, closed.asking, closed.admitted) == (0, [], [])


async def test_a_held_ladder_re_probes_on_its_runbooks_clock_and_ends_cleared(
    time_env: WorkflowEnvironment,
) -> None:
    """A 1-minute recheck: the node the breaker holds is probed clean within two minutes of
    its fault passing (before: at the next ask, 5 minutes on)."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    third = sorted(fleet.nodes)[2]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handles = await _storm(time_env, queues, fleet, [HOLDS, HOLDS, RECHECKS])
        fleet.clear_faults(third)  # a transient: gone while the breaker holds its cordon
        await time_env.sleep(timedelta(minutes=2))
        ended = await state_of(handles[2])
    assert ended.outcome is Outcome.CLEARED
    assert ended.outcome_detail == "clean re-probe while the breaker held the cordon"
    assert not fleet.node(third).unschedulable


async def _storm(
    env: WorkflowEnvironment, queues: Queues, fleet: SimFleet, runbooks: list[Runbook]
) -> list[Handle]:
    """The pool's first nodes go bad one after the other, each with its runbook, each once
    the budget published what the last one changed: the first two are cordoned, the third
    trips the breaker, and it holds the cordons of the third and those after."""
    handles = []
    for i, (name, runbook) in enumerate(zip(sorted(fleet.nodes), runbooks, strict=False)):
        handles.append(await _sick(env, queues, fleet, name, runbook=runbook))
        phase = Phase.TOLERATING if i < 2 else Phase.HELD_BY_BREAKER
        await wait_for_phase(env, handles[-1], phase, step=timedelta(seconds=1))
        await published(env, fleet, queues.pool, i + 1)
    return handles


def _asks(*nodes: str) -> list[CordonAsk]:
    return [CordonAsk(holder=f"h/{n}", node=n, pool="a", renewed_at=T0) for n in nodes]


def test_the_reopening_note_counts_an_admitted_ladders_renewed_ask_as_admitted_only() -> None:
    """make test-stress saw "1 admitted, 3 held" for two held: the admitted ladder's renewed
    ask, which crossed its leave, was counted held too."""
    state = BudgetState(pool="a", pool_size=20, policy=POLICY, asking=_asks(*"abc"))
    slow_start.begin(state)
    [leave] = slow_start.leave_now(state, T0)
    state.asking = [*state.asking, leave]  # its renewed ask, sent before the leave arrived
    assert slow_start.note(state) == "reopening: 1 cordon at a time (1 admitted, 2 held)"


def test_a_slow_start_admits_one_then_two_then_four_as_each_proves_real() -> None:
    state = BudgetState(pool="a", pool_size=20, policy=POLICY, asking=_asks(*"abcdefgh"))
    slow_start.begin(state)
    rounds = [slow_start.leave_now(state, T0)]
    slow_start.proven(state, "h/a")  # its ladder asked for a lease: the fault is real
    rounds.append(slow_start.leave_now(state, T0))
    slow_start.proven(state, "h/b")
    slow_start.proven(state, "h/c")
    rounds.append(slow_start.leave_now(state, T0))
    slow_start.gone(state, "h/d")  # ended unproven (cleared): its place frees, no growth
    rounds.append(slow_start.leave_now(state, T0))
    assert [[a.node for a in leave] for leave in rounds] == [["a"], ["b", "c"], list("defg"), ["h"]]
    assert state.slow_start == 4 and [a.node for a in state.admitted] == list("efgh")
    # Unproven for a storm window, they free their places; with nothing left waiting or
    # unproven, the slow start ends and cordons go at once again.
    slow_start.settle(state, T0 + POLICY.storm_window + timedelta(seconds=1))
    assert state.slow_start == 0 and state.admitted == []
    # The cluster's breaker grants no leases, so no cordon could prove real there: all go.
    cluster = BudgetState(pool=CLUSTER_POOL, pool_size=20, asking=_asks("a", "b"))
    slow_start.begin(cluster)
    assert [a.node for a in slow_start.leave_now(cluster, T0)] == ["a", "b"]


def test_a_held_ladder_re_probes_on_its_runbooks_clock() -> None:
    thermal = Runbook(
        name="t",
        match=Match(xids=[1]),
        tolerance=timedelta(minutes=10),
        recheck_every=timedelta(minutes=1),
    )
    assert reprobe_every(thermal) == timedelta(minutes=1)
    assert reprobe_every(thermal.scaled(60)) == timedelta(seconds=1)  # the demo's
    assert reprobe_every(REAL) == timedelta(minutes=5)  # at least every ASK_AGAIN_EVERY
    assert reprobe_every(Runbook(name="x", match=Match(xids=[1])).scaled(60)) == timedelta(
        seconds=10
    )  # no tolerance: its verification watch
