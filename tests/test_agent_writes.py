"""Defect 4: the agent wrote ``nodes/status`` every probe round even when nothing changed (at
10,000 nodes, 333 writes a second, each fanned out to every node watcher). Now it writes on
change plus a heartbeat every five minutes, and its Xids only when one is new; the fleet scan
reads the heartbeat with that in mind (a stale problem condition is history, not a fault).

The writes are counted in the API server's request log, the agent's ticks driven by a clock the
test moves (no sleeps)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import typer
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.attribution.evidence import RecentXid
from remedy.core.models import NodeRef
from remedy.detection.conditions import GPU_PROBLEM, REMEDY_READY, NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.runbook import RunbookSet
from remedy.scan.fleet import NodeStatus, OpenWork, judge_liveness, plan_scan, status_of, summarise
from remedy.scan.liveness import AGENT_HEARTBEAT, MIN_SILENT_HEARTBEATS, SILENT_AFTER, Sightings
from tests.kube import NODES, NOW, call, kube, node, sent
from workers.agent import AgentConfig, NodeAgent
from workers.cli import app

N1 = "n1-000"  # the simulated host's name: the node under test
NODE = f"/api/v1/nodes/{N1}"
STATUS = f"{NODE}/status"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now

    def ticks(self, every: timedelta, until: timedelta) -> Iterator[datetime]:
        """Moves the clock ``every`` until ``until`` past now, yielding each time."""
        end = self.now + until
        while self.now + every <= end:
            self.now += every
            yield self.now


def agent_on(
    api: ApiServer, env: WorkflowEnvironment, clock: Clock, **config: Any
) -> tuple[NodeAgent, SimFleet]:
    """The agent of node n1: a simulated host, its marks on the API server. No runbooks: a
    fault is published, never reported (the writes are what is counted)."""
    fleet = SimFleet(nodes=1, name_prefix="n1", clock=clock)
    api.objects[NODES, None, N1] = node(N1)
    agent = NodeAgent(
        env.client,
        fleet.host(N1),
        RunbookSet([]),
        kube(api, clock=clock).marks,
        AgentConfig(node=NodeRef(name=N1), interval_s=30, **config),
        clock=clock,
    )
    return agent, fleet


def on_node(api: ApiServer) -> dict[str, dict[str, Any]]:
    conditions = api.objects[NODES, None, N1]["status"]["conditions"]
    return {c["type"]: c for c in conditions}


async def test_defect_4_unchanged_conditions_are_written_once_per_heartbeat(
    api: ApiServer, dev_env: WorkflowEnvironment
) -> None:
    clock = Clock()
    agent, _ = agent_on(api, dev_env, clock)
    await agent.tick([])
    assert len(sent(api, "PATCH", STATUS)) == 1  # the first round: nothing there yet
    for _ in clock.ticks(timedelta(seconds=30), AGENT_HEARTBEAT - timedelta(seconds=30)):
        await agent.tick([])
    assert len(sent(api, "PATCH", STATUS)) == 1  # 9 rounds, nothing changed: no write
    assert len(sent(api, "GET", NODE)) == 1  # nor a read: what it wrote is what it knows
    clock.now = NOW + AGENT_HEARTBEAT
    await agent.tick([])
    assert len(sent(api, "PATCH", STATUS)) == 2  # the heartbeat
    assert len(sent(api, "GET", NODE)) == 2
    written = on_node(api)[GPU_PROBLEM]
    assert datetime.fromisoformat(written["lastHeartbeatTime"]) == NOW + AGENT_HEARTBEAT
    assert datetime.fromisoformat(written["lastTransitionTime"]) == NOW  # no transition


async def test_defect_4_a_change_is_written_at_once_and_only_once(
    api: ApiServer, dev_env: WorkflowEnvironment
) -> None:
    clock = Clock()
    agent, fleet = agent_on(api, dev_env, clock)
    await agent.tick([])
    clock.now += timedelta(seconds=30)
    fleet.inject(N1, "ecc_dbe", gpu=3)
    await agent.tick([])
    assert len(sent(api, "PATCH", STATUS)) == 2
    problem = on_node(api)[GPU_PROBLEM]
    assert problem["status"] == "True"
    assert datetime.fromisoformat(problem["lastTransitionTime"]) == clock.now
    for _ in clock.ticks(timedelta(seconds=30), timedelta(minutes=2)):
        await agent.tick([])  # the fault persists, the same words: nothing to write
    assert len(sent(api, "PATCH", STATUS)) == 2
    fleet.clear_faults(N1)
    clock.now += timedelta(seconds=30)
    await agent.tick([])
    assert len(sent(api, "PATCH", STATUS)) == 3
    assert on_node(api)[GPU_PROBLEM]["status"] == "False"
    assert on_node(api)[REMEDY_READY]["status"] == "True"


async def test_defect_4_the_heartbeat_is_configurable_and_a_lost_condition_comes_back_with_it(
    api: ApiServer, dev_env: WorkflowEnvironment
) -> None:
    clock = Clock()
    agent, _ = agent_on(api, dev_env, clock, heartbeat_s=60)
    for _ in range(3):  # 0, 30, 60 s: writes at 0 and 60
        await agent.tick([])
        clock.now += timedelta(seconds=30)
    assert len(sent(api, "PATCH", STATUS)) == 2
    # Someone removed remedy's conditions (the node object recreated): the agent finds out
    # at its next heartbeat, when it reads the node before writing.
    api.objects[NODES, None, N1] = node(N1)
    await agent.tick([])  # 90 s
    assert len(sent(api, "PATCH", STATUS)) == 2
    clock.now += timedelta(seconds=30)
    await agent.tick([])  # 120 s
    assert len(sent(api, "PATCH", STATUS)) == 3
    assert {GPU_PROBLEM, REMEDY_READY} <= on_node(api).keys()
    assert datetime.fromisoformat(on_node(api)[GPU_PROBLEM]["lastTransitionTime"]) == clock.now


async def test_defect_4_someone_elses_equal_heartbeat_saves_the_agents_write(
    api: ApiServer, dev_env: WorkflowEnvironment
) -> None:
    """The node is read before a heartbeat: if what it holds is as fresh (the controller wrote
    the same conditions after a verified ladder), the agent does not write."""
    clock = Clock()
    agent, _ = agent_on(api, dev_env, clock)
    await agent.tick([])
    clock.now += AGENT_HEARTBEAT - timedelta(seconds=30)
    marks = kube(api, clock=clock).marks
    written = await call(marks.conditions, N1)
    fresh = [c.model_copy(update={"last_heartbeat_time": clock.now}) for c in written]
    await call(marks.set_conditions, N1, fresh)
    clock.now += timedelta(seconds=30)
    await agent.tick([])
    assert len(sent(api, "GET", NODE)) == 3  # the agent's two reads, the test's one
    assert len(sent(api, "PATCH", STATUS)) == 2  # the agent's first and the test's


async def test_defect_4_xids_are_written_only_when_one_is_new(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    marks = kube(api).marks
    xid = RecentXid(code=79, gpu="SN-3", at=NOW, pid=7, process="python")
    await call(marks.record_xids, "n1", [xid])
    await call(marks.record_xids, "n1", [xid])  # the kernel log saw what NVML had pushed
    await call(marks.record_xids, "n1", [])
    assert len(sent(api, "PATCH", "/api/v1/nodes/n1")) == 1
    later = RecentXid(code=48, gpu="SN-3", at=NOW + timedelta(minutes=1))
    await call(marks.record_xids, "n1", [xid, later])
    assert len(sent(api, "PATCH", "/api/v1/nodes/n1")) == 2


# -- what the heartbeat means to the fleet scan -------------------------------------------


def _problem(beat: datetime) -> NodeCondition:
    return NodeCondition(
        type=GPU_PROBLEM,
        status="True",
        reason="Xid79",
        message="GPU 3 fell off the bus",
        last_heartbeat_time=beat,
        last_transition_time=beat,
    )


def _facts(name: str, problem_beat: datetime, agent_beat: datetime, now: datetime) -> NodeFacts:
    return NodeFacts(
        name=name,
        pool="a",
        problems=[_problem(problem_beat)],
        last_heartbeat=agent_beat,
        silent_for=now - agent_beat,
    )


def test_defect_4_a_stale_problem_condition_is_not_read_as_a_current_fault() -> None:
    now = NOW + timedelta(hours=1)
    old = now - SILENT_AFTER - timedelta(seconds=1)
    nodes = [
        _facts("fresh", now - AGENT_HEARTBEAT, now - AGENT_HEARTBEAT, now),
        # The agent died after its last word: a silent agent, not a fault still going on.
        _facts("died", old, old, now),
        # The agent lives but no longer writes that condition (its NIC check was turned off).
        _facts("dropped", old, now, now),
    ]
    work = OpenWork()
    assert [status_of(n, work) for n in nodes] == [
        NodeStatus.UNHEALTHY,
        NodeStatus.SILENT,
        NodeStatus.HEALTHY,
    ]
    plan = plan_scan(nodes, work)
    assert [n.name for n in plan.remediate] == ["fresh"]
    assert [n.name for n in plan.silent] == ["died"]
    # Scans recorded before read every problem as current (workflow.patched keeps them so).
    old_plan = plan_scan(nodes, work, stale_problems=False)
    assert [n.name for n in old_plan.remediate] == ["fresh", "died", "dropped"]
    [pool] = summarise(nodes, work, now).pools
    assert pool.attention == {"fresh": NodeStatus.UNHEALTHY, "died": NodeStatus.SILENT}


async def test_defect_4_the_kubernetes_scan_reads_a_silent_agents_problem_as_silence(
    api: ApiServer,
) -> None:
    """The heartbeat as written on the node, read back by the Kubernetes fleet view, and left
    unchanged for longer than the silent window by the controller's clock (remedy.scan.liveness)."""
    now = NOW + timedelta(hours=1)
    api.objects[NODES, None, "n1"] = node()
    stale = _problem(now - SILENT_AFTER - timedelta(minutes=1))
    await call(kube(api, clock=lambda: now).marks.set_conditions, "n1", [stale])
    listed = await call(kube(api, clock=lambda: now).fleet.nodes)
    _, seen = judge_liveness(listed, Sightings(), now, now)
    later = now + SILENT_AFTER + timedelta(seconds=1)
    [facts], _ = judge_liveness(listed, seen, later, later)
    assert status_of(facts, OpenWork()) is NodeStatus.SILENT
    assert not plan_scan([facts], OpenWork()).remediate


# -- the two defaults, tied -------------------------------------------------------------


def _params(command: str, *args: str) -> dict[str, Any]:
    group: Any = typer.main.get_command(app)
    return dict(group.commands[command].make_context(command, list(args)).params)


def test_the_agents_heartbeat_and_the_controllers_silence_share_one_default() -> None:
    assert _params("agent", "--node", "n1")["heartbeat_s"] == AGENT_HEARTBEAT.total_seconds()
    assert _params("controller")["agent_heartbeat_s"] == AGENT_HEARTBEAT.total_seconds()
    assert SILENT_AFTER >= MIN_SILENT_HEARTBEATS * AGENT_HEARTBEAT


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["--agent-silent-after", "90"], True),  # the old default: under one heartbeat
        (["--agent-heartbeat-s", "60", "--agent-silent-after", "90"], True),
        (["--agent-heartbeat-s", "30", "--agent-silent-after", "90"], False),
    ],
)
def test_the_controller_refuses_a_silence_shorter_than_two_heartbeats(
    args: list[str], refused: bool, tmp_path: Any
) -> None:
    from typer.testing import CliRunner

    # A missing runbook folder stops the command right after the check, before any connection.
    missing = str(tmp_path / "none")
    result = CliRunner().invoke(app, ["controller", *args, "--runbooks", missing])
    assert ("shorter than 2 agent heartbeats" in result.output) is refused
    assert result.exit_code != 0
