"""Who blocks whom in a pool, as pure functions of the budget's state: every holder with what it
waits for and the commands that free it, the waiters in the order they are served, and the
breaker always said — in the budget's Web UI details and in `remedy status --blocking`."""

from __future__ import annotations

from datetime import timedelta

from remedy.core.models import Scope
from remedy.disruption import blocking
from remedy.disruption.budget import BudgetState, Lease
from remedy.disruption.budget_view import budget_details
from tests.test_held_by_people import T0, lease, request, seized_pool


def mixed_pool() -> BudgetState:
    """A seized pool of 17 with one more share: gpu-5's ladder drains under a lease of its own,
    gpu-6's a GPU lease on GPUs 2 and 3."""
    state = seized_pool()
    state.policy = state.policy.model_copy(update={"max_disruption": "5"})  # gpu-4 waits first
    state.holders += [
        Lease(holder="node-remediation/gpu-5", node="gpu-5", granted_at=T0 - timedelta(hours=2)),
        Lease(
            holder="node-remediation/gpu-6",
            node="gpu-6",
            granted_at=T0,
            scope=Scope.GPU,
            gpus=[2, 3],
        ),
    ]
    state.waiting = [w for w in state.waiting if w.node not in ("gpu-5", "gpu-6")]
    return state


def test_every_holder_says_what_it_waits_for_and_what_frees_it() -> None:
    found = blocking.who_blocks(mixed_pool(), phases={"gpu-5": "draining", "gpu-0": "x"})
    assert [(h.node, h.by_people) for h in found.holders] == [
        ("gpu-3", True),  # people's shares first, the oldest first
        ("gpu-0", True),
        ("gpu-1", True),
        ("gpu-2", True),
        ("gpu-5", False),  # then the working ladders
        ("gpu-6", False),
    ]
    held, approval, draining, gpu = (found.holders[i] for i in (0, 1, 4, 5))
    assert held.holds == "a hold (left cordoned)" and held.waits_for == "left cordoned for a person"
    assert held.commands == ["remedy release-hold gpu-3 --pool a"]
    assert approval.holds == "a lease" and approval.waits_for == "approval for replace"
    assert approval.commands[0] == "remedy approve gpu-0" and approval.phase == "x"
    assert draining.waits_for == "its ladder (draining)" and draining.phase == "draining"
    assert draining.commands == ["remedy abort gpu-5 --reason WHY"]
    assert gpu.holds == "a GPU lease (GPUs 2, 3)" and gpu.waits_for == "its ladder (working)"


def test_waiters_are_listed_in_the_order_served_with_their_place() -> None:
    state = BudgetState(pool="a", pool_size=4, holders=[lease("gpu-0")])
    state.waiting = [request("gpu-2", cordoned=False), request("gpu-1")]
    state.waiting[0] = state.waiting[0].model_copy(update={"scope": Scope.GPU, "gpus": [7]})
    found = blocking.who_blocks(state, waiting_since={"gpu-1": T0})
    assert [(w.position, w.node, w.since) for w in found.waiters] == [
        (1, "gpu-2", None),
        (2, "gpu-1", T0),
    ]
    shown = blocking.lines(found, T0 + timedelta(minutes=5))
    assert shown[0] == "pool a: 1/1 shares held, 2 waiting (read at 2026-11-01 10:05:00 UTC)"
    assert "    1. gpu-2 (GPUs 7)" in shown
    assert "    2. gpu-1 since 11-01 10:00:00 (cordoned while it waits)" in shown
    assert "    gpu-0: a lease since 11-01 10:00:00 (5m), waits for its ladder (working)" in shown
    assert "        remedy abort gpu-0 --reason WHY" in shown


def test_the_breaker_is_always_said() -> None:
    state = BudgetState(pool="a", pool_size=4, unhealthy={"gpu-0": T0})
    assert blocking.breaker(state) == "ok (1 unhealthy in the storm window)"
    assert "Breaker: ok (1 unhealthy in the storm window)" in budget_details(state)
    assert "  holders: none" in blocking.lines(blocking.who_blocks(state), T0)
    state.tripped, state.tripped_at, state.breaker_note = True, T0, "storm: 3 of 4 unhealthy"
    said = blocking.lines(blocking.who_blocks(state), T0)[1]
    assert said == (
        "  breaker: TRIPPED (condition Quarantine=True since 2026-11-01 10:00:00 UTC): "
        "storm: 3 of 4 unhealthy; resume with remedy resume-pool a"
    )
    assert "Breaker: **BREAKER TRIPPED** (condition Quarantine=True since" in budget_details(state)
    assert "resume with `remedy resume-pool a`" in budget_details(state)


def test_the_budget_details_name_holders_and_waiters_with_positions() -> None:
    details = budget_details(mixed_pool())
    assert "**ALERT pool a is held by people: 4 of 5 shares" not in details  # one share works
    assert "**pool a: 4 of 5 shares held by people**" in details
    assert "**Holders** (6):" in details
    assert (
        "- `gpu-0` holds a lease since 2026-11-01 10:00:00 UTC, waits for approval for replace"
        " — `remedy approve gpu-0`, or `remedy abort gpu-0 --reason WHY && "
        "remedy release-hold gpu-0 --pool a`"
    ) in details
    assert "- `gpu-5` holds a lease since 2026-11-01 08:00:00 UTC, waits for its ladder" in details
    assert "**Waiting** (11, served in this order):" in details
    assert "- 1. `gpu-4` (cordoned while it waits)" in details
    assert "- 10. `gpu-15` (cordoned while it waits)" in details
    assert (
        "`gpu-16`" not in details and "- and 1 more (`remedy status --blocking --json`)" in details
    )


def test_a_seized_pool_says_so_in_both() -> None:
    state = seized_pool()
    assert "**ALERT pool a is held by people: 4 of 4 shares" in budget_details(state)
    shown = blocking.lines(blocking.who_blocks(state), T0)
    assert "  ALERT people hold every share: nothing in the pool moves until they answer" in shown


def test_a_waiter_reads_its_place_and_the_holders_ahead() -> None:
    found = blocking.who_blocks(mixed_pool(), phases={"gpu-5": "draining"})
    said = blocking.place_in_line(found, "gpu-6") + blocking.place_in_line(found, "gpu-99")
    assert said == ""  # a holder, and a node not in line: no place
    line = blocking.place_in_line(found, "gpu-7")
    assert line.startswith(
        "waiting for a lease in pool a: place 2 of 11; held by gpu-3 (left cordoned for a "
        "person since 11-01 09:00:00 UTC: `remedy release-hold gpu-3 --pool a`), gpu-0 "
        "(approval for replace since 11-01 10:00:00 UTC: `remedy approve gpu-0`), "
    )
    assert "gpu-5 (its ladder (draining) since 11-01 08:00:00 UTC: `remedy abort gpu-5" in line
    assert "people hold every share" not in line  # gpu-5 and gpu-6 work
    tripped = mixed_pool()
    tripped.tripped, tripped.breaker_note = True, "storm"
    assert "; breaker TRIPPED (condition Quarantine=True): storm; resume with `remedy" in (
        blocking.place_in_line(blocking.who_blocks(tripped), "gpu-7")
    )


def test_the_details_of_a_pool_of_thousands_build_only_what_they_show() -> None:
    """The budget writes its details every workflow task (and again in every replay): built
    from the first ten holders and waiters, they say what the whole lists would."""
    state = mixed_pool()
    state.policy = state.policy.model_copy(update={"max_disruption": "100%"})
    state.pool_size = 3000
    state.holders += [  # granted out of order: the oldest must still come first
        Lease(
            holder=f"node-remediation/n-{i}",
            node=f"n-{i}",
            granted_at=T0 + timedelta(seconds=(i * 7919) % 1000),
        )
        for i in range(1000)
    ]
    state.waiting += [request(f"w-{i}") for i in range(1000)]
    whole, first = blocking.who_blocks(state), blocking.who_blocks(state, first=blocking.SHOWN)
    assert len(first.holders) == len(first.waiters) == blocking.SHOWN
    assert first.holders == whole.holders[: blocking.SHOWN]
    assert first.waiters == whole.waiters[: blocking.SHOWN]
    assert (
        (first.holding, first.in_line) == (len(whole.holders), len(whole.waiters)) == (1006, 1011)
    )
    assert blocking.markdown(first) == blocking.markdown(whole)
    assert blocking.lines(first, T0) == blocking.lines(whole, T0)
    assert "**Holders** (1006):" in budget_details(state)
    assert "- and 996 more (`remedy status --blocking --json`)" in budget_details(state)
