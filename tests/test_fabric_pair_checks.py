"""Pair tests in an active-check round, on the time-skipping server with the simulated fleet
(its ib_write_bw Jobs print perftest's format: adapters/sim/fabric.py): run only between the idle
nodes the round holds, never a busy one; the slow member among four new nodes is found by
re-pairing and goes to its ladder, the others are uncordoned; healthy pairs pass; a pair Job
that never finishes fails closed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import typer
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.detection.fabric.verdict import BANDWIDTH_LOW, COULD_NOT_RUN, FabricTest
from remedy.scan.active_checks import ActiveCheckPolicy, CheckResult
from remedy.scan.fabric import FabricPolicy
from tests.conftest import running_workers
from tests.test_active_checks import _results, _round
from workers.cli.fabric import fabric_policy

PAIRS = FabricPolicy(
    pair_test=FabricTest.IB_WRITE_BW, port_rate_gbps=400, deadline=timedelta(minutes=5)
)
POLICY = ActiveCheckPolicy(idle_at_once="4", fabric=PAIRS)


def _new_fleet(idle: int, busy: int = 0) -> SimFleet:
    """New nodes (never checked: due at once); the last ``busy`` by name serve work."""
    fleet = SimFleet(nodes=idle + busy, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    for node in sorted(fleet.nodes)[:idle]:
        fleet.idle(node)
    return fleet


async def test_the_slow_member_of_four_new_nodes_is_found_and_sent_to_its_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = _new_fleet(4, busy=1)
    a, slow, c, d, busy = sorted(fleet.nodes)
    fleet.fabric.write_gbps[slow] = 150.0  # its NIC: below 80 % of the 400 Gb/s port
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, POLICY)
        ladder = time_env.client.get_workflow_handle(remediation_workflow_id(slow))
        state = await REMEDIATION_STATE.ask(ladder)

    assert _results(summary) == {
        a: CheckResult.PASSED,
        slow: CheckResult.FAILED,
        c: CheckResult.PASSED,
        d: CheckResult.PASSED,
    }
    # (a,slow) fails, (c,d) passes; re-paired with cleared nodes: (a,c) passes, (slow,d) fails.
    tested = {tuple(r.nodes) for r in fleet.fabric.started}  # each round's pairs run at once
    assert tested == {(a, slow), (c, d), (a, c), (slow, d)}
    assert busy not in {n for pair in tested for n in pair}  # never a node serving work
    bad = [f for f in state.findings if f.unhealthy]
    assert {(f.check, f.reason) for f in bad} == {("fabric", BANDWIDTH_LOW)}
    assert any(f"{slow} is the slow member" in f.evidence for f in bad)
    assert "average 150.0 Gb/s < 320 Gb/s (a 400 Gb/s port x 80%)" in bad[0].evidence
    for node in (a, c, d):
        assert (node, "restore") in fleet.actions
    assert (slow, "restore") not in fleet.actions
    assert f"slow: {slow}" in summary.pairs


async def test_healthy_pairs_pass_and_their_jobs_are_removed(time_env: WorkflowEnvironment) -> None:
    fleet = _new_fleet(4)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, POLICY)

    assert set(_results(summary).values()) == {CheckResult.PASSED}
    assert len(fleet.fabric.started) == 2  # one round: (n0,n1), (n2,n3)
    assert sorted(fleet.fabric.removed) == sorted(r.run_id for r in fleet.fabric.started)
    assert summary.pairs == "pair tests: 2 pairs among 4 nodes"


async def test_a_node_whose_diagnose_failed_is_not_paired(time_env: WorkflowEnvironment) -> None:
    fleet = _new_fleet(3)
    a, failing, c = sorted(fleet.nodes)
    fleet.inject(failing, "silent_under_load", gpu=1)  # only the deep diagnose finds it
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, POLICY)

    assert _results(summary) == {
        a: CheckResult.PASSED,
        failing: CheckResult.FAILED,
        c: CheckResult.PASSED,
    }
    assert [r.nodes for r in fleet.fabric.started] == [[a, c]]
    assert summary.pairs == "pair tests: 1 pair among 2 nodes"


async def test_a_pair_job_that_never_finishes_fails_closed(time_env: WorkflowEnvironment) -> None:
    fleet = _new_fleet(2)
    a, b = sorted(fleet.nodes)
    fleet.fabric.hung.add(b)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, POLICY)
        state = await REMEDIATION_STATE.ask(
            time_env.client.get_workflow_handle(remediation_workflow_id(a))
        )

    # No third node to clear either: both stay undecided, and a failed test is never a pass.
    assert _results(summary) == {a: CheckResult.FAILED, b: CheckResult.FAILED}
    [finding] = [f for f in state.findings if f.unhealthy]
    assert finding.reason == COULD_NOT_RUN and "no verdict" in finding.evidence
    assert "undecided" in finding.evidence


async def test_without_a_pair_test_no_pair_is_run(time_env: WorkflowEnvironment) -> None:
    fleet = _new_fleet(2)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy(idle_at_once="2"))

    assert set(_results(summary).values()) == {CheckResult.PASSED}
    assert fleet.fabric.started == [] and summary.pairs == ""


def test_the_pair_test_is_ib_write_bw_against_the_port_rate() -> None:
    with pytest.raises(ValueError, match="port's rate"):
        FabricPolicy(pair_test=FabricTest.IB_WRITE_BW)
    with pytest.raises(ValueError, match="ib_write_bw"):
        FabricPolicy(pair_test=FabricTest.NCCL_PAIR, port_rate_gbps=400)


def test_the_controller_flags_make_ib_write_bw_the_pair_test() -> None:
    images = {"nccl_tests": "registry.example/nccl-tests:2.13", "perftest": "registry.example/pt"}

    policy = fabric_policy(["nccl_loopback", "ib_write_bw"], "10m", images, port_rate=400)

    assert policy.tests == [FabricTest.NCCL_LOOPBACK]  # per node
    assert (policy.pair_test, policy.port_rate_gbps) == (FabricTest.IB_WRITE_BW, 400)
    with pytest.raises(typer.Exit):
        fabric_policy(["ib_write_bw"], "10m", images)  # no --fabric-port-rate
    with pytest.raises(typer.Exit):
        fabric_policy(["ib_write_bw"], "10m", {"perftest": ""}, port_rate=400)  # no image
