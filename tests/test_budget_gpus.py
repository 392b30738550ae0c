"""The disruption budget's arithmetic in GPUs (remedy/disruption/budget_gpus.py): pure, no
server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from adapters.kubernetes.objects import node_gpus
from remedy.core.models import Scope
from remedy.disruption.budget import BudgetPolicy, BudgetState, LeaseGrant, LeaseRequest
from remedy.disruption.budget_gpus import allowed_gpus, covered, fits, gpu_note, gpus_out, take
from remedy.disruption.budget_messages import HumanHold
from remedy.disruption.budget_view import budget_details
from remedy.scan.fleet import PoolSummary
from workers.status import FleetStatus, PoolStatus
from workers.status_table import POOL_HEADERS, pool_rows

NOW = datetime(2026, 11, 1, tzinfo=UTC)
CAPPED = BudgetPolicy(max_disruption="1", max_gpus_out="2")


def ask(node: str, scope: Scope = Scope.NODE, policy: BudgetPolicy = CAPPED) -> LeaseRequest:
    """A ladder on ``node`` (8 GPUs, GPU 3 faulty) asks for a lease of ``scope``."""
    return LeaseRequest(
        holder=f"remediation/{node}",
        node=node,
        pool="p",
        task_queue="q",
        scope=scope,
        gpus=[3] if scope is Scope.GPU else [],
        pool_size=4,
        pool_gpus=32,
        node_gpus=8,
        policy=policy,
    )


def pool(policy: BudgetPolicy = CAPPED) -> BudgetState:
    return BudgetState(pool="p", policy=policy, pool_size=4, pool_gpus=32)


@pytest.mark.parametrize(
    ("spec", "gpus", "allowed"),
    [(None, 32, None), ("2", 32, 2), ("10%", 32, 4), ("all-but-30", 32, 2), ("64", 32, 32)],
)
def test_allowed_gpus_reads_as_max_disruption(
    spec: str | None, gpus: int, allowed: int | None
) -> None:
    assert allowed_gpus(spec, gpus) == allowed


def test_a_bad_gpu_cap_is_refused() -> None:
    with pytest.raises(ValidationError, match="not a disruption budget"):
        BudgetPolicy(max_gpus_out="two")


def test_gpu_leases_count_gpus_not_nodes_and_stop_at_the_gpu_cap() -> None:
    state = pool()
    for node in ("a", "b"):
        assert fits(state, ask(node, Scope.GPU))
        take(state, ask(node, Scope.GPU), NOW)
    assert state.in_use == 0 and gpus_out(state) == 2  # no node out: max_disruption untouched
    assert not fits(state, ask("c", Scope.GPU))  # the third GPU would pass max_gpus_out
    assert not fits(state, ask("c"))  # a node lease: its 8 GPUs too
    assert "2/2 GPUs out" in budget_details(state)
    row = pool_rows(FleetStatus(pools=[PoolStatus(summary=PoolSummary(pool="p"), budget=state)]))
    assert row[0][POOL_HEADERS.index("GPU leases")] == "2/2"
    assert row[0][POOL_HEADERS.index("leases")] == "0/1"  # no node out


def test_a_node_lease_takes_every_gpu_of_its_node() -> None:
    policy = BudgetPolicy(max_disruption="2", max_gpus_out="9")
    state = pool(policy)
    take(state, ask("a", policy=policy), NOW)
    assert state.in_use == 1 and gpus_out(state) == 8
    assert fits(state, ask("b", Scope.GPU, policy))  # 8 + 1 ≤ 9
    assert not fits(state, ask("b", policy=policy))  # 8 + 8 > 9, though a 2nd node may go


def test_a_node_left_for_a_person_keeps_its_gpus_out() -> None:
    policy = BudgetPolicy(max_disruption="2", max_gpus_out="9")
    state = pool(policy)
    take(state, ask("a", policy=policy), NOW)
    state.hand_to_human("remediation/a", NOW)
    state.holders = []
    assert state.held == [HumanHold(node="a", since=NOW, gpus=8)]
    assert gpus_out(state) == 8 and not fits(state, ask("b", policy=policy))


def test_a_lease_larger_than_the_cap_waits_for_every_other_gpu() -> None:
    policy = BudgetPolicy(max_disruption="2", max_gpus_out="2")
    state = pool(policy)
    assert fits(state, ask("a", policy=policy))  # alone: else a reboot could never run
    take(state, ask("b", Scope.GPU, policy), NOW)
    assert not fits(state, ask("a", policy=policy))


def test_the_node_after_a_gpu_lease_waits_holding_its_gpu_and_replaces_it() -> None:
    policy = BudgetPolicy(max_disruption="1", max_gpus_out="8")
    state = pool(policy)
    take(state, ask("a", Scope.GPU, policy), NOW)
    take(state, ask("b", Scope.GPU, policy), NOW)
    node = ask("a", policy=policy)
    assert not covered(state, node)  # asked again for the node: an upgrade, not a re-grant
    assert covered(state, ask("a", Scope.GPU, policy))
    assert not fits(state, node)  # 1 (b's) + 8 > 8: a's own GPU counts once, in its node's
    state.holders = [h for h in state.holders if h.node != "b"]
    assert fits(state, node)
    take(state, node, NOW)
    assert [(h.node, h.scope) for h in state.holders] == [("a", Scope.NODE)]
    assert gpus_out(state) == 8 and state.in_use == 1
    assert covered(state, ask("a", Scope.GPU, policy))  # the node covers its GPU rungs


def test_without_a_gpu_cap_a_gpu_scoped_rung_takes_a_node_lease() -> None:
    policy = BudgetPolicy(max_disruption="1")
    state = pool(policy)
    take(state, ask("a", Scope.GPU, policy), NOW)
    assert state.holders[0].scope is Scope.NODE and state.in_use == 1
    assert not fits(state, ask("b", Scope.GPU, policy))
    assert gpu_note(state) == "8"


def test_a_node_grant_stays_bare_and_a_gpu_grant_says_its_scope() -> None:
    """Releases before read only the bare grant (the pool): a node lease's is written so; a
    GPU lease's says its scope, and a bare one reads as the node."""
    assert LeaseGrant(pool="p").model_dump() == "p"
    gpu = LeaseGrant(pool="p", scope=Scope.GPU)
    assert LeaseGrant.model_validate(gpu.model_dump()) == gpu
    assert LeaseGrant.model_validate("p").scope is Scope.NODE


def test_a_kubernetes_node_counts_its_physical_gpus() -> None:
    """GPU feature discovery's count (it stays 8 under MIG), else the device plugin's."""
    labelled = {"metadata": {"name": "n", "labels": {"nvidia.com/gpu.count": "8"}}}
    mig = {**labelled, "status": {"capacity": {"nvidia.com/mig-1g.10gb": "56"}}}
    plugin = {"metadata": {"name": "n"}, "status": {"capacity": {"nvidia.com/gpu": "4"}}}
    assert [node_gpus(n) for n in (labelled, mig, plugin, {"metadata": {"name": "n"}})] == [
        8,
        8,
        4,
        0,
    ]
