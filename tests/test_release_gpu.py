"""`remedy release-gpu`: a GPU quarantine a ladder left behind (it ended needs_human) is lifted
by a person, on the twin through the controller, once: a second call and a GPU remedy never
held exit 2 with why; a node whose ladder still runs is refused (its restore returns it)."""

from __future__ import annotations

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from contract.names import remediation_workflow_id
from remedy.core.errors import ActionRefused
from remedy.core.models import Action, Scope
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome
from remedy.runbook import Approval, Match, Runbook, Rung
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import report
from tests.test_cli import Said, cli

BAD = 3
# The GPU's pods evicted, the fault stays: nothing left to try, the GPU stays quarantined.
GPU_DRAIN_ONLY = Runbook(
    name="gpu-drain-only",
    match=Match(xids=[48]),
    cordon=False,
    ladder=[Rung(action=Action.DRAIN, scope=Scope.GPU)],
)


def shared_node(prefix: str) -> tuple[SimFleet, str]:
    """A fleet of one inference node of its own on the shared dev server: a pod per GPU."""
    fleet = own_fleet(prefix, 1)
    node = next(iter(fleet.nodes))
    fleet.place(node, "shared")
    return fleet, node


async def release(client: Client, queues: Queues, node: str, gpu: int, *more: str) -> Said:
    where = ["--address", client.service_client.config.target_host, "--task-queue"]
    return await cli("release-gpu", node, "--gpu", str(gpu), *where, queues.controller, *more)


def test_the_twin_releases_any_ladders_gpu_once() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=8)
    node = next(iter(fleet.nodes))
    fleet.place(node, "shared")
    gpus = fleet.cluster.gpu_scope
    assert gpus is not None
    gpus.evict_gpu_pods(node, [BAD], "k", kill=False, owner="node-remediation/x")

    never = gpus.release_gpu(node, 5)
    done = gpus.release_gpu(node, BAD)
    again = gpus.release_gpu(node, BAD)

    assert not never.lifted
    with pytest.raises(ActionRefused, match=rf"{node} has 8 GPUs \(0-7\): no GPU 99"):
        gpus.release_gpu(node, 99)
    assert done.lifted and done.held_by == "node-remediation/x"
    assert fleet.node(node).quarantined == {}
    assert not again.lifted


async def test_release_gpu_returns_a_gpu_a_ladder_left_for_a_person(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet, node = shared_node("relgpu")
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        ladder = await report(
            client, queues, fleet.inject(node, "ecc_dbe", gpu=BAD), GPU_DRAIN_ONLY
        )
        left = await ladder.result()
        held = dict(fleet.node(node).quarantined)
        released = await release(client, queues, node, BAD, "--note", "RMA 7")
        again = await release(client, queues, node, BAD)
        never = await release(client, queues, node, 5)
        beyond = await release(client, queues, node, 99)

    assert left.outcome is Outcome.NEEDS_HUMAN
    assert held == {BAD: remediation_workflow_id(node)}  # what the command is for
    assert released[0] == 0, released
    assert (
        f"{node}: GPU {BAD} back in allocation (held by {remediation_workflow_id(node)}"
        in (released[1])
    )
    assert fleet.node(node).quarantined == {}
    assert again == (2, f"error: {node}: GPU {BAD}: remedy holds no quarantine of it\n")
    assert never == (2, f"error: {node}: GPU 5: remedy holds no quarantine of it\n")
    assert beyond == (2, f"error: {node}: GPU 99: {node} has 8 GPUs (0-7): no GPU 99\n")


async def test_release_gpu_refuses_while_the_nodes_ladder_runs(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet, node = shared_node("relrun")
    waits = Runbook(
        name="waits",
        match=Match(xids=[48]),
        cordon=False,
        ladder=[Rung(action=Action.DRAIN, scope=Scope.GPU, approval=Approval.REQUIRED)],
    )
    async with running_workers(client, fleet) as queues:
        await report(client, queues, fleet.inject(node, "ecc_dbe", gpu=BAD), waits)
        refused = await release(client, queues, node, BAD)
    assert refused[0] == 2
    assert "a ladder still runs on the node" in refused[1]
