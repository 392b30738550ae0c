"""A pool held by people, as pure functions of the budget's state: who holds its shares, since
when, the commands that free each; the nodes out of scheduling; and what a runbook may say an
unanswered approval does (checked where it is written)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remedy.core.models import Action
from remedy.disruption import held_by_people
from remedy.disruption.budget import BudgetPolicy, BudgetState, Lease, LeaseRequest
from remedy.disruption.budget_messages import HumanHold, HumanWait
from remedy.disruption.budget_view import budget_details
from remedy.runbook import Match, Runbook, RunbookError, Rung, load_runbooks
from remedy.runbook.authored import OnApprovalTimeout
from remedy.runbook.explain import explain, timings

T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)


def request(node: str, cordoned: bool = True) -> LeaseRequest:
    return LeaseRequest(
        holder=f"node-remediation/{node}",
        node=node,
        pool="a",
        task_queue="q",
        cordoned=cordoned,
        pool_size=17,
    )


def lease(node: str) -> Lease:
    return Lease(holder=f"node-remediation/{node}", node=node, granted_at=T0)


def seized_pool() -> BudgetState:
    """17 nodes at 20 % (4 shares): three ladders wait for a replace approval holding their
    lease, a fourth node was left cordoned for a person; thirteen cordoned nodes wait."""
    state = BudgetState(pool="a", pool_size=17, policy=BudgetPolicy(max_disruption="20%"))
    state.holders = [lease(f"gpu-{i}") for i in range(3)]
    state.held = [HumanHold(node="gpu-3", since=T0 - timedelta(hours=1))]
    state.waiting = [request(f"gpu-{i}") for i in range(4, 17)]
    for i in range(3):
        state.note_human_wait(
            HumanWait(
                holder=f"node-remediation/gpu-{i}",
                node=f"gpu-{i}",
                what="approval for replace",
                since=T0 + timedelta(minutes=i),
            )
        )
    return state


def test_a_pool_whose_every_share_waits_for_people_is_seized_and_says_what_frees_it() -> None:
    state = seized_pool()
    rows = held_by_people.held_by_people(state)
    assert held_by_people.seized(state)
    assert [r.node for r in rows] == ["gpu-3", "gpu-0", "gpu-1", "gpu-2"]  # the oldest first
    assert rows[1].commands == [
        "remedy approve gpu-0",
        "remedy abort gpu-0 --reason WHY && remedy release-hold gpu-0 --pool a",
    ]
    assert rows[0].commands == ["remedy release-hold gpu-3 --pool a"]
    lines = held_by_people.status_lines(state, T0 + timedelta(hours=2))
    assert lines[0] == (
        "ALERT pool a is held by people: 4 of 4 shares wait for a person, "
        "13 ladders wait behind them"
    )
    assert "      gpu-0: approval for replace since 11-01 10:00:00 (2h)" in lines
    assert "      gpu-3: left cordoned for a person since 11-01 09:00:00 (3h)" in lines
    assert "          remedy approve gpu-2" in lines
    details = budget_details(state)
    assert "`remedy approve gpu-1`, or `remedy abort gpu-1 --reason WHY && " in details
    assert "- `gpu-2` holds a lease since 2026-11-01 10:02:00 UTC, waits for approval" in details


def test_a_pool_with_a_share_left_or_no_one_behind_is_held_but_not_seized() -> None:
    state = seized_pool()
    state.waiting = []  # nobody waits behind them: held, not seized
    assert not held_by_people.seized(state)
    assert held_by_people.status_lines(state, T0)[0] == "pool a: 4 of 4 shares held by people"
    free = seized_pool()
    free.holders = free.holders[:2]  # gpu-2's ladder released its lease: its wait ends with it
    free.forget_gone_waits()
    assert [w.node for w in free.waiting_for_human] == ["gpu-0", "gpu-1"]
    assert not held_by_people.seized(free)


def test_a_ladder_without_a_lease_holds_no_one_up_and_a_wait_ends_when_it_says_so() -> None:
    state = seized_pool()
    stranger = HumanWait(holder="node-remediation/gpu-9", node="gpu-9", since=T0)
    state.note_human_wait(stranger)  # gpu-9 waits for a lease, not on a person: not holding
    state.note_human_wait(HumanWait(holder="node-remediation/gpu-0", node="gpu-0"))  # approved
    assert [w.node for w in state.waiting_for_human] == ["gpu-1", "gpu-2"]


def test_nothing_to_say_of_a_pool_no_person_holds() -> None:
    state = BudgetState(pool="a", pool_size=4, holders=[lease("gpu-0")])
    assert held_by_people.status_lines(state, T0) == []
    assert held_by_people.alert(state) == "" and not held_by_people.seized(state)
    assert "held by people" not in budget_details(state)


def test_the_cordoned_and_waiting_count_toward_the_unschedulable_share() -> None:
    state = seized_pool()
    state.waiting.append(request("gpu-17", cordoned=False))  # a runbook that does not cordon
    out = held_by_people.out_of_scheduling(state)
    assert len(out) == 17 and "gpu-17" not in out


def test_a_node_whose_share_went_back_is_out_but_never_against_the_cap() -> None:
    state = BudgetState(pool="a", pool_size=5, policy=BudgetPolicy(max_disruption="1"))
    state.holders = [lease("gpu-0")]
    state.keep_out("node-remediation/gpu-0", T0)  # on_approval_timeout: release
    state.holders = []
    assert state.in_use == 0 and held_by_people.out_of_scheduling(state) == ["gpu-0"]
    assert held_by_people.held_by_people(state) == []  # its share is no one's to free
    # Its next ladder waits like any other; left for a person again, it counts again.
    assert not state.take_over_hold(request("gpu-0"), T0)
    state.hand_to_human("node-remediation/gpu-0", T0, "gpu-0")
    assert [(h.node, h.counted) for h in state.held] == [("gpu-0", True)] and state.in_use == 1


RUNG = """name: r
match: {{xids: [48]}}
ladder:
  - action: {action}
{more}"""


def load(tmp_path: Path, action: str, *more: str) -> list[str]:
    path = tmp_path / "r.yaml"
    path.write_text(RUNG.format(action=action, more="".join(f"    {m}\n" for m in more)))
    try:
        load_runbooks([path])
    except RunbookError as err:
        return [str(p).removeprefix(f"{path}:") for p in err.problems]
    return []


@pytest.mark.parametrize("choice", [c.value for c in OnApprovalTimeout])
def test_every_choice_loads_on_a_rung_that_asks(tmp_path: Path, choice: str) -> None:
    timeout = [] if choice == "wait" else ["approval_timeout: 8h"]
    more = ["approval: required", *timeout, f"on_approval_timeout: {choice}"]
    assert load(tmp_path, "replace", *more) == []


def test_a_choice_where_nothing_asks_names_its_line_and_field(tmp_path: Path) -> None:
    [problem] = load(tmp_path, "diagnose", "on_approval_timeout: release")
    assert problem.startswith("5: ladder[0].on_approval_timeout: on_approval_timeout is for a rung")
    # A rung that may ask to run undrained does ask (if_drain_failed: ask, the default).
    assert load(tmp_path, "reboot", "on_approval_timeout: skip") == []
    stop = load(tmp_path, "reboot", "if_drain_failed: stop", "on_approval_timeout: skip")
    assert [p.split(": ")[1] for p in stop] == ["ladder[0].on_approval_timeout"]


def test_wait_with_a_deadline_it_would_ignore_is_refused(tmp_path: Path) -> None:
    more = ("approval: required", "on_approval_timeout: wait", "approval_timeout: 8h")
    [problem] = load(tmp_path, "replace", *more)
    assert problem.startswith("7: ladder[0].approval_timeout: on_approval_timeout: wait has no")


def test_explain_says_what_the_silence_comes_to_and_never_counts_an_endless_wait() -> None:
    def ladder(choice: OnApprovalTimeout) -> Runbook:
        timeout = {} if choice is OnApprovalTimeout.WAIT else {"approval_timeout": "8h"}
        replace = Rung(
            action=Action.REPLACE, approval="required", on_approval_timeout=choice, **timeout
        )
        return Runbook(name="r", match=Match(xids=[48]), ladder=[replace])  # type: ignore[arg-type]

    released = explain(ladder(OnApprovalTimeout.RELEASE))
    assert any(
        "none within 8h → stop, node stays cordoned for a human, its share" in line
        for line in released
    )
    endless = ladder(OnApprovalTimeout.WAIT)
    assert any("no deadline (its wait is not counted here)" in line for line in explain(endless))
    # The 4h default is not a bound: only the drain the replace needs first (no drain before it)
    # is counted before the rung, where a skip's 8h approval deadline is counted too.
    drain_first = timings(endless)[0].starts_by
    assert drain_first < timedelta(hours=1)
    skipped = timings(ladder(OnApprovalTimeout.SKIP))[0].starts_by
    assert skipped == drain_first + timedelta(hours=8)
