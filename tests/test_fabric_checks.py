"""Fabric tests in the active checks and in admission, on the time-skipping server with the
simulated fleet (its Jobs print the tools' formats: adapters/sim/fabric.py): run only on the node
the check holds, after its diagnose passed; a slow node fails its check and goes to its ladder, a
Job that never finishes fails closed at its deadline, a new node with a slow fabric is rejected."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import typer
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.provider import KubernetesSettings
from adapters.sim import SimFleet
from contract.messages import REMEDIATION_STATE
from contract.names import remediation_workflow_id
from remedy.detection.fabric.verdict import BANDWIDTH_LOW, COULD_NOT_RUN, FabricTest
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import ActiveCheckPolicy, CheckResult
from remedy.scan.admission import AdmissionPolicy
from remedy.scan.fabric import FabricPolicy
from tests.conftest import running_workers
from tests.test_active_checks import _check, _mark, _results, _round
from tests.test_node_admission import NEW, admit
from workers.cli.fabric import fabric_policy

LOOPBACK = FabricPolicy(tests=[FabricTest.NCCL_LOOPBACK], deadline=timedelta(minutes=5))


def _fleet(nodes: int, busy: int = 0) -> SimFleet:
    """The last ``busy`` nodes (by name) keep their GPU pods: serving work."""
    fleet = SimFleet(nodes=nodes, gpus_per_node=2, pool=f"pool-{uuid.uuid4().hex[:8]}")
    for node in sorted(fleet.nodes)[: nodes - busy]:
        fleet.idle(node)
    for node in fleet.nodes:
        _mark(fleet, node, _check(datetime.now(UTC) - timedelta(days=2)))
    return fleet


async def test_a_slow_loopback_fails_the_active_check_and_starts_the_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = _fleet(3, busy=1)
    good, slow, busy = sorted(fleet.nodes)  # busy: serving work, no fabric test may run there
    fleet.fabric.busbw[slow] = 90.0  # below the H100 floor of 150 GB/s
    policy = ActiveCheckPolicy(idle_at_once="2", fabric=LOOPBACK)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, policy)
        ladder = time_env.client.get_workflow_handle(remediation_workflow_id(slow))
        state = await REMEDIATION_STATE.ask(ladder)

    assert _results(summary) == {good: CheckResult.PASSED, slow: CheckResult.FAILED}
    assert {r.nodes[0] for r in fleet.fabric.started} == {good, slow}  # never the busy node
    [finding] = state.findings
    assert (finding.check, finding.reason) == ("fabric", BANDWIDTH_LOW)
    assert "90.0 GB/s < 150 GB/s" in finding.evidence
    # The passed node's Jobs are removed; the failed node's stay for a person to read.
    [passed] = [r for r in fleet.fabric.started if r.nodes == [good]]
    assert fleet.fabric.removed == [passed.run_id]
    assert (good, "restore") in fleet.actions and (slow, "restore") not in fleet.actions


async def test_a_job_that_never_finishes_fails_closed_at_its_deadline(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = _fleet(1)
    [node] = fleet.nodes
    fleet.fabric.hung.add(node)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy(fabric=LOOPBACK))
        ladder = time_env.client.get_workflow_handle(remediation_workflow_id(node))
        state = await REMEDIATION_STATE.ask(ladder)

    assert _results(summary) == {node: CheckResult.FAILED}
    [finding] = state.findings
    assert finding.reason == COULD_NOT_RUN
    assert "no verdict" in finding.evidence


async def test_without_fabric_tests_the_check_is_as_before(time_env: WorkflowEnvironment) -> None:
    fleet = _fleet(1)
    async with running_workers(time_env.client, fleet) as queues:
        summary = await _round(time_env.client, queues, ActiveCheckPolicy())

    assert list(_results(summary).values()) == [CheckResult.PASSED]
    assert fleet.fabric.started == []


async def test_a_new_node_with_a_slow_fabric_is_rejected(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = fleet.join(NEW)
    fleet.fabric.busbw[NEW] = 40.0
    policy = AdmissionPolicy(gap=timedelta(minutes=10), fabric=LOOPBACK)
    async with running_workers(time_env.client, fleet) as queues:
        result = await (await admit(time_env.client, queues, shipped_runbooks, policy)).result()

    assert not result.admitted
    assert [d.healthy for d in result.diagnoses] == [True, True, False]
    assert result.reason.startswith("fabric tests failed: nccl_loopback: bus bandwidth")
    assert node.awaiting_admission and node.rejected == result.reason


def test_a_pair_test_is_not_a_per_node_check() -> None:
    with pytest.raises(ValueError, match="ib_write_bw test two nodes"):
        FabricPolicy(tests=[FabricTest.IB_WRITE_BW])


def test_the_controller_flags_make_the_policy_and_refuse_a_test_without_its_image() -> None:
    images = {"nccl_tests": "registry.example/nccl-tests:2.13", "nvbandwidth": ""}

    policy = fabric_policy(["nccl_loopback"], "15m", images)

    assert policy.tests == [FabricTest.NCCL_LOOPBACK]
    assert policy.deadline == timedelta(minutes=15)
    with pytest.raises(typer.Exit):
        fabric_policy(["nvbandwidth"], "10m", images)  # no --fabric-nvbandwidth-image
    with pytest.raises(typer.Exit):
        fabric_policy(["ib_write_bw"], "10m", images)  # a pair: no image, no --fabric-port-rate
    settings = KubernetesSettings(fabric_nccl_tests_image=images["nccl_tests"])
    assert settings.fabric_images() is not None
    assert KubernetesSettings().fabric_images() is None  # no images: no fabric Jobs
