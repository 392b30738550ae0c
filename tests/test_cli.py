"""The operator's commands against the real dev server: approve and abort a running ladder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from contract.names import remediation_workflow_id
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase, RemediationResult
from remedy.runbook import Match, Runbook, Rung, load_runbooks
from tests.conftest import ROOT, Queues, own_fleet, pool_known, running_workers
from tests.ladder import report, state_of
from tests.processes import Children
from workers.cli import app
from workflows.node_remediation import NodeRemediation

WAITS = Runbook(
    name="reset-after-approval",
    match=Match(xids=[48]),
    cordon=True,
    watch=timedelta(0),  # a real-time server: look for the Xid once, no 10-minute watch
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)


Said = tuple[int, str]  # a command's exit code and what it printed
NodeHandle = WorkflowHandle[NodeRemediation, RemediationResult]


async def cli(*args: str) -> Said:
    # The command runs its own event loop: keep it off this one.
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.output


async def test_approve_and_abort_from_the_command_line(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("cli", 2)
    first, second = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        handles = [
            await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
            for node in (first, second)
        ]
        for handle in handles:
            for _ in range(100):
                if (await state_of(handle)).phase is Phase.AWAITING_APPROVAL:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("never reached the approval")
        approved = await cli(
            "approve", first, "--address", address, "--by", "alice", "--note", "ticket 42"
        )
        aborted = await cli(
            "abort", second, "--address", address, "--by", "bob", "--reason", "vendor on site"
        )
        first_result, second_result = [await h.result() for h in handles]
        first_state = await state_of(handles[0])
    missing = await cli("approve", "no-such-node", "--address", address)
    [approval] = first_state.approvals
    who = f"alice ({approval.identity})"  # the name given, and the identity the CLI connected as
    assert approved == (
        0,
        f"{first}: approved rung 2 (reset_gpu) by {who} [unverified]; ladder now acting\n",
    )
    assert first_result.outcome is Outcome.RECOVERED
    assert (approval.by, approval.note) == ("alice", "ticket 42") and approval.identity
    assert aborted == (0, f"{second}: ladder aborted: {second_result.detail}\n")
    assert second_result.outcome is Outcome.ABORTED
    assert second_result.detail.startswith("aborted by bob (")
    assert ") [unverified]: vendor on site" in second_result.detail
    assert fleet.node(second).unschedulable  # abort leaves the node as it is by default
    assert missing[0] == 2 and "no running remediation" in missing[1]


def test_abort_requires_a_reason() -> None:
    result = CliRunner().invoke(app, ["abort", "n1"])
    assert result.exit_code == 1 and "--reason" in result.output


RUNBOOK = """name: hand-reset
match: {reasons: [ManualTrigger]}
cordon: true
ladder:
  - action: drain
  - action: reset_gpu
    approval: required
"""


async def trigger(
    client: Client, node: str, runbooks: Path, address: str, queues: Queues, *more: str
) -> Said:
    """`remedy trigger NODE --runbook hand-reset` for the test's own workers (given the runbooks
    and the pool first: the ladder climbs the controller's own runbook, in a pool it knows)."""
    queues.known.add(*load_runbooks([runbooks]))
    await pool_known(client, queues)
    return await cli(
        "trigger",
        node,
        "--runbook",
        "hand-reset",
        *more,
        *("--runbooks", str(runbooks), "--address", address, "--pool", queues.pool),
        *("--task-queue", queues.controller, "--node-task-queue", queues.agents),
    )


async def awaiting_approval(client: Client, node: str) -> NodeHandle:
    """The node's ladder once it waits for an approval (a bound of 10 s against a hang on the
    dev server's real clock)."""
    handle = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
    for _ in range(200):
        if (await state_of(handle)).phase is Phase.AWAITING_APPROVAL:
            return handle
        await asyncio.sleep(0.05)
    raise AssertionError(f"{node}: the ladder never reached its approval")


async def test_trigger_then_show_the_timeline_then_approve(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    (tmp_path / "hand-reset.yaml").write_text(RUNBOOK)
    fleet = own_fleet("cli", 1)
    [node] = sorted(fleet.nodes)
    fleet.inject(node, "ecc_dbe", gpu=2)
    async with running_workers(client, fleet) as queues:
        started = await trigger(client, node, tmp_path, address, queues, "--reason", "flaky rank")
        handle = await awaiting_approval(client, node)
        waiting = await cli("show", node, "--address", address)
        await cli("approve", node, "--address", address)
        result = await handle.result()
        done = await cli("show", node, "--address", address, "--json")
    unknown = await cli("trigger", node, "--runbook", "nope", "--runbooks", str(tmp_path))
    # The ladder took the finding before the command answered: it says the phase it saw.
    said = re.fullmatch(rf"{node}: hand-reset → node-remediation/{node} \((\w+)\)\n", started[1])
    assert started[0] == 0 and said, started
    assert said[1] in {p.value for p in Phase} - {Phase.WAITING.value}
    assert waiting[0] == 0
    assert waiting[1].startswith(
        f"{node}: awaiting_approval — runbook hand-reset, trigger ManualTrigger on node"
    )
    rows = waiting[1].splitlines()[1:]
    assert [line.split()[2] for line in rows] == ["cordon", "drain", "reset_gpu"]
    assert "awaiting approval" in rows[-1], rows  # the rung under way (issue 52)
    assert result.outcome is Outcome.RECOVERED
    shown = json.loads(done[1])
    assert shown["status"] == "recovered"
    assert [a["action"] for a in shown["attempts"]] == ["cordon", "drain", "reset_gpu", "restore"]
    assert unknown[0] == 1 and "no runbook named 'nope'" in unknown[1]


async def test_trigger_refuses_a_node_the_cluster_does_not_have(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    (tmp_path / "hand-reset.yaml").write_text(RUNBOOK)
    fleet = own_fleet("cli", 1)
    ghost = f"no-such-{uuid.uuid4().hex[:6]}"  # the fleet's cluster has no such node
    try:
        async with running_workers(client, fleet) as queues:
            refused = await trigger(client, ghost, tmp_path, address, queues)
            assert refused == (
                2,
                f"error: {ghost}: the cluster has no node {ghost} (ladder ended node_gone)\n",
            )
            handle = client.get_workflow_handle_for(
                NodeRemediation.run, remediation_workflow_id(ghost)
            )
            result = await asyncio.wait_for(handle.result(), timeout=10)  # ended already
    finally:  # a ladder that went on regardless must not outlive the test
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(remediation_workflow_id(ghost)).terminate()
    assert result.outcome is Outcome.NODE_GONE
    assert [a.action for a in result.attempts if a.rung >= 0] == []  # nothing else was tried


async def test_trigger_with_no_controller_says_the_finding_waits(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    node, queue = f"idle-{uuid.uuid4().hex[:6]}", f"nobody-{uuid.uuid4().hex[:6]}"
    try:
        said = await cli(
            "trigger",
            node,
            *("--runbook", "gpu-memory-ecc", "--task-queue", queue),
            *("--address", client.service_client.config.target_host),
        )
    finally:
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(remediation_workflow_id(node)).terminate()
    assert said == (
        0,
        f"{node}: gpu-memory-ecc → node-remediation/{node} "
        f"(waiting_for_finding: no controller polls {queue} yet)\n",
    )


def test_python_dash_m_runs_the_same_cli(processes: Children) -> None:
    done = processes.run([sys.executable, "-m", "workers", "--help"], timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    for command in (
        "status",
        "show",
        "trigger",
        "approve",
        "abort",
        "clear",
        "resume-pool",
        "demo",
    ):
        assert command in done.stdout
