"""Liveness as the Kubernetes adapter reads and writes it, over real HTTP on the strict API
server: the agent's heartbeat is the agent's alone. After a verified ladder the controller set
remedy's conditions with ``lastHeartbeatTime = now`` (its own clock), so a dead agent looked
alive for another silent window; and a condition with no heartbeat stood in for one."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.cluster import MarkActivities
from kubeapi import ApiServer
from remedy.core.models import ConditionsUpdate, NodeRef, ProbeReport
from remedy.detection.conditions import GPU_PROBLEM, REMEDY_READY, NodeCondition
from tests.kube import NODES, NOW, call, kube, node, sent
from tests.test_agent_writes import _problem

AGENT_CLOCK = NOW - timedelta(minutes=20)  # the node's clock is twenty minutes behind
LATER = NOW + timedelta(hours=1)  # when the controller's ladder ends


def _agents_problem() -> NodeCondition:
    """Its fault, on its clock, since five minutes before its last heartbeat."""
    earlier = AGENT_CLOCK - timedelta(minutes=5)
    return _problem(AGENT_CLOCK).model_copy(update={"last_transition_time": earlier})


def _ready() -> NodeCondition:
    said = {"type": REMEDY_READY, "status": "True", "reason": "DependenciesPresent"}
    return _problem(AGENT_CLOCK).model_copy(update=said)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _on_node(api: ApiServer) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in api.objects[NODES, None, "n1"]["status"]["conditions"]}


async def test_the_controller_clears_a_recovered_fault_without_writing_the_agents_heartbeat(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    agent = kube(api, clock=lambda: AGENT_CLOCK).marks
    await call(agent.set_conditions, "n1", [_agents_problem(), _ready()])
    controller = kube(api, clock=lambda: LATER)
    beat = (await call(controller.fleet.nodes))[0].last_heartbeat
    publish = MarkActivities(controller.marks).publish_conditions
    clean = ConditionsUpdate(
        node=NodeRef(name="n1"), report=ProbeReport(node="n1", checks_run=["gpu"], started_at=LATER)
    )
    await call(ActivityEnvironment().run, publish, clean)
    after = _on_node(api)
    assert (after[GPU_PROBLEM]["status"], after[GPU_PROBLEM]["reason"]) == ("False", "NoGpuProblem")
    # The agent's heartbeat as it wrote it, and the transition on its clock too.
    assert [_time(after[t]["lastHeartbeatTime"]) for t in (GPU_PROBLEM, REMEDY_READY)] == [
        AGENT_CLOCK,
        AGENT_CLOCK,
    ]
    assert _time(after[GPU_PROBLEM]["lastTransitionTime"]) == AGENT_CLOCK
    assert [f.last_heartbeat for f in await call(controller.fleet.nodes)] == [beat]
    writes = len(sent(api, "PATCH", "/api/v1/nodes/n1/status"))
    await call(ActivityEnvironment().run, publish, clean)  # said already: nothing to write
    assert len(sent(api, "PATCH", "/api/v1/nodes/n1/status")) == writes


async def test_a_condition_without_a_heartbeat_is_no_heartbeat(api: ApiServer) -> None:
    """Someone wrote remedy's readiness with no ``lastHeartbeatTime``: read with the
    controller's clock standing in, it changed on every scan and passed for a live agent."""
    unbeating = node()
    unbeating["status"]["conditions"].append(
        {"type": REMEDY_READY, "status": "True", "reason": "DependenciesPresent", "message": ""}
    )
    api.objects[NODES, None, "n1"] = unbeating
    [facts] = await call(kube(api, clock=lambda: LATER).fleet.nodes)
    assert facts.last_heartbeat is None
