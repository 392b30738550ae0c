"""Below the floor: the node's agent cordons its own node the moment it finds a fault whose
runbook cordons, before it reports (workers/agent.py ``cordon_own_node``); the ladder finds the
cordon its own, restores it, and owns what comes next. Not while a published breaker holds
new cordons. On Kubernetes it is the controller's cordon written as the agent, which the
admission policy admits on its own node only."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.control import CORDONED_BY, CORDONED_BY_AGENT, TAINT
from adapters.kubernetes.objects import AGENT_MANAGER
from adapters.sim import SimFleet
from adapters.sim.cluster import REMEDY_CORDON
from adapters.sim.identity import agent_signing_key
from contract.names import remediation_workflow_id
from kubeapi import ApiServer
from remedy.core.models import Action, CordonState, Finding, NodeRef, Severity
from remedy.disruption.budget import BudgetPolicy
from remedy.disruption.quarantine import BreakerState
from remedy.ladder.remediation import AttemptResult, Outcome, RemediationResult
from remedy.runbook import Match, Runbook, RunbookSet, load_runbooks
from remedy.scan.cluster import CordonOwner, OwnNode
from tests.conftest import ROOT, own_fleet, running_workers
from tests.kube import NODES, NOW, call, kube
from tests.test_agent_policy import kubelets_node, refusals
from tests.test_fleet_scan import scan_and_adoption
from workers.agent import AgentConfig, NodeAgent, cordon_own_node
from workflows.node_remediation import NodeRemediation


def _runbooks() -> RunbookSet:
    return RunbookSet(r.scaled(600) for r in load_runbooks([ROOT / "runbooks"]))


async def test_the_agent_cordons_before_its_ladder_which_adopts_and_restores_the_cordon(
    time_env: WorkflowEnvironment,
) -> None:
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    sick, held = sorted(fleet.nodes)[:2]
    own = fleet.cluster
    assert own.breakers is not None
    async with running_workers(time_env.client, fleet) as queues:

        def agent(name: str) -> NodeAgent:
            config = AgentConfig(
                node=NodeRef(name=name, pool=queues.pool),
                task_queue=queues.agents,
                controller_task_queue=queues.controller,
            )
            queues.known.add(*_runbooks())
            return NodeAgent(
                time_env.client,
                fleet.host(name),
                _runbooks(),
                None,
                config,
                own=OwnNode(own.control, own.breakers),
                key=agent_signing_key(name),  # the key its node carries (no marks to publish)
            )

        first = agent(sick)
        fleet.inject(sick, "ecc_dbe", gpu=3)
        await first.tick([])  # the agent's round: cordon, then report
        by_agent = fleet.node(sick).annotations.get(REMEDY_CORDON, "")
        handle = time_env.client.get_workflow_handle_for(
            NodeRemediation.run, remediation_workflow_id(sick)
        )
        result = await handle.result()
        # The breaker published as tripped: the agent leaves its node to the ladder.
        fleet.breakers[queues.pool] = BreakerState.TRIPPED
        second = agent(held)
        fleet.inject(held, "ecc_dbe", gpu=0)
        await second.tick([])
        in_service = not fleet.node(held).unschedulable
    # The fault's findings each report (NVML's Xid, the ECC counter): the first cordons.
    assert first.self_cordons[0] is CordonState.CORDONED
    assert set(first.self_cordons[1:]) <= {CordonState.ALREADY_OURS}
    assert by_agent.startswith(remediation_workflow_id(sick) + ": finding: ")
    cordon = result.attempts[0]
    assert (cordon.action, cordon.result) == (Action.CORDON, AttemptResult.DONE)
    assert cordon.detail == CordonState.ALREADY_OURS.value  # the ladder's own, adopted
    assert result.outcome is Outcome.RECOVERED and not fleet.node(sick).unschedulable
    done = [a for n, a in fleet.actions if n == sick]
    assert done[0] == "cordon" and done.count("cordon") == 1 and done[-1] == "restore"
    assert set(second.self_cordons) == {CordonState.HELD_BY_BREAKER} and in_service


async def test_on_kubernetes_the_agents_cordon_is_admitted_adopted_and_restored(
    api: ApiServer,
) -> None:
    """Written as the agent (its field manager), on its own node: the admission policy admits
    it, and the controller's restore undoes it (the field tracking names remedy's agent, not
    someone else who cordoned the node since)."""
    api.objects["v1/namespaces", None, "remedy"] = {"metadata": {"name": "remedy"}}
    api.objects[NODES, None, "n1"] = kubelets_node("n1")
    agent_side = kube(api, field_manager=AGENT_MANAGER)
    controller = kube(api)
    assert agent_side.breakers is not None and controller.breakers is not None
    own = OwnNode(agent_side.control, agent_side.breakers)
    finding = Finding(
        node="n1", check="xid", reason="Xid48", severity=Severity.CRITICAL, observed_at=NOW
    )
    await call(controller.breakers.publish, "gpu", BreakerState.TRIPPED)
    held = await call(cordon_own_node, own, NodeRef(name="n1", pool="gpu"), finding)
    await call(controller.breakers.publish, "gpu", BreakerState.CLOSED)
    before = api.objects[NODES, None, "n1"]
    done = await call(cordon_own_node, own, NodeRef(name="n1", pool="gpu"), finding)
    after = api.objects[NODES, None, "n1"]
    [facts] = await call(controller.fleet.nodes)
    owner = CordonOwner(remediation_workflow_id("n1"), "finding: Xid48")
    adopted = await call(controller.control.cordon, "n1", owner)
    await call(controller.marks.set_conditions, "n1", [])  # the controller writes too
    restored = await call(controller.control.restore, "n1")
    assert held is CordonState.HELD_BY_BREAKER and done is CordonState.CORDONED
    assert refusals(after, before) == []  # admitted on its own node
    assert refusals(after, before, node="n2") == ["remedy-agent on n2 may not change node n1"]
    assert after["metadata"]["annotations"][CORDONED_BY] == remediation_workflow_id("n1")
    assert TAINT in after["spec"]["taints"]
    assert after["metadata"]["annotations"][CORDONED_BY_AGENT] == "true"
    assert facts.agent_cordoned_at is not None  # the scan can tell it from a person's cordon
    assert adopted is CordonState.ALREADY_OURS and restored
    restored_node = api.objects[NODES, None, "n1"]
    assert not restored_node["spec"]["unschedulable"]
    assert CORDONED_BY_AGENT not in restored_node["metadata"].get("annotations", {})


async def test_an_agents_cordon_whose_report_was_lost_is_adopted_by_the_scan(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """The agent cordons, its report is refused (the server cannot take it), and the agent is
    gone: no ladder owns the cordon, and none is on record. The scan adopts it, as it adopts a
    failed ladder's, on the agent's mark; the agent's cordon that a ladder took up and left to
    a person (ended needing a human) stays that person's."""
    client = dev_env.client
    fleet = own_fleet("lost", 4)
    lost, persons, *_ = sorted(fleet.nodes)
    hold = RunbookSet([Runbook(name="hold-now", match=Match(xids=[48]), ladder=[])])
    refused = client.config()
    refused["namespace"] = "no-such-namespace"  # every report is refused, as by a server gone
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)
    calm = BudgetPolicy(storm_share=1.0)  # two of four nodes failing is no storm here
    async with running_workers(client, fleet, runbooks=fast, policy=calm) as queues:

        def agent(name: str, reports_to: Client) -> NodeAgent:
            config = AgentConfig(
                node=NodeRef(name=name, pool=queues.pool),
                task_queue=queues.agents,
                controller_task_queue=queues.controller,
            )
            assert fleet.cluster.breakers is not None
            own = OwnNode(fleet.cluster.control, fleet.cluster.breakers)
            queues.known.add(*hold)
            key = agent_signing_key(name)  # the key its node carries (no marks to publish)
            return NodeAgent(reports_to, fleet.host(name), hold, None, config, own=own, key=key)

        fleet.inject(lost, "ecc_dbe", gpu=1)
        await agent(lost, Client(**refused)).tick([])  # cordoned; the report never arrives
        fleet.inject(persons, "ecc_dbe", gpu=2)
        await agent(persons, client).tick([])
        left = await client.get_workflow_handle(
            remediation_workflow_id(persons), result_type=RemediationResult
        ).result()
        summary, adopted = await scan_and_adoption(client, queues, lost)
    assert left.outcome is Outcome.NEEDS_HUMAN
    assert summary.orphaned_cordons == [lost]
    # The fault is still there: the adopting ladder looked again and holds it for a person.
    assert adopted.runbook == "orphaned-cordon" and adopted.outcome is Outcome.NEEDS_HUMAN
    assert fleet.node(lost).unschedulable and fleet.node(persons).unschedulable
