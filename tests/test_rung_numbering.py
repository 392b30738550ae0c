"""One rung numbering for people: the Web UI's details, `remedy show`, `approve`'s answer (and
its ``--rung``) and `explain` name the same number for the same rung, counted from 1; the wire
keeps the ladder's index."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from remedy.core.models import Action, NodeRef
from remedy.ladder.approval_check import why_not_approve
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import (
    Attempt,
    AttemptResult,
    Escalation,
    Outcome,
    Phase,
    RemediationState,
)
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import Approval, ApproveRequest
from tests.conftest import own_fleet, running_workers
from tests.test_cli import RUNBOOK, awaiting_approval, cli, trigger
from tests.test_details_to_act_on import finding
from workers.show import NodeLadder, timeline


async def test_show_the_details_approve_and_explain_name_the_same_rung_number(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    (tmp_path / "hand-reset.yaml").write_text(RUNBOOK)
    fleet = own_fleet("numbering", 1)
    [node] = sorted(fleet.nodes)
    fleet.inject(node, "ecc_dbe", gpu=2)
    async with running_workers(client, fleet) as queues:
        await trigger(client, node, tmp_path, address, queues)
        handle = await awaiting_approval(client, node)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        waiting = await cli("show", node, "--address", address)
        approved = await cli("approve", node, "--rung", "2", "--address", address, "--by", "al")
        assert approved[0] == 0, approved  # the rung waiting, by its number
        result = await handle.result()
        done = await cli("show", node, "--address", address)
    explained = await cli("runbooks", "explain", "hand-reset", "--runbooks", str(tmp_path))
    [approval] = result.approvals
    assert approval.rung == 1  # the wire keeps the ladder's index
    assert result.outcome is Outcome.RECOVERED
    # reset_gpu is rung 2 wherever a person reads or types it
    details = metadata.current_details
    assert "**Rung** 2 of 2: reset_gpu" in details
    assert "- **rung 1 drain**: done" in details
    assert approved[0] == 0 and f"{node}: approved rung 2 (reset_gpu) by al (" in approved[1]
    shown = {line.split()[2]: line.split()[0] for line in waiting[1].splitlines()[1:]}
    assert shown == {"cordon": "-", "drain": "1", "reset_gpu": "2"}  # reset_gpu: under way
    after = done[1].splitlines()
    assert any(re.match(r"\s*2 \d\d:\d\d:\d\d approved by al ", line) for line in after)
    assert any(re.match(r"\s*2 \d\d:\d\d:\d\d reset_gpu ", line) for line in after)
    assert explained[0] == 0
    assert re.search(r"rung 2: .*reset", explained[1]) and "rung 3" not in explained[1]


def test_a_ladder_that_continues_into_another_runbook_keeps_one_numbering() -> None:
    """GPU 1's reset verified (rungs 1 and 2), the ladder continues with GPU 6's runbook from
    its reset: that runbook's rungs are numbered on (its drain, done already, is 3; its reset
    4; its reboot 5), in the details, `show`, a refusal and the approval a person types."""
    second = Runbook(
        name="gpu-6",
        match=Match(xids=[48]),
        ladder=[drain(), reset(), Rung(action=Action.REBOOT, approval="required")],
    )
    at = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)

    def ran(rung: int, action: Action, result: AttemptResult, epoch: int) -> Attempt:
        return Attempt(
            rung=rung, action=action, started_at=at, finished_at=at, result=result, epoch=epoch
        )

    state = RemediationState(
        node=NodeRef(name="n1", pool="p"),
        runbook=second,
        trigger=finding(48, 6),
        phase=Phase.AWAITING_APPROVAL,
        rung=2,
        epoch=1,
        escalations=[
            Escalation(
                at=at,
                from_runbook="gpu-1",
                to_runbook="gpu-6",
                because="Xid 48 on GPU 6",
                kind="continued",
                from_rung=1,
                to_rung=1,
            )
        ],
        attempts=[
            ran(0, Action.DRAIN, AttemptResult.DONE, 0),
            ran(1, Action.RESET_GPU, AttemptResult.VERIFIED, 0),
            ran(1, Action.RESET_GPU, AttemptResult.UNVERIFIED, 1),
        ],
        approvals=[Approval(rung=2, by="al", at=at, epoch=1)],
    )
    details = remediation_details(state)
    assert "from rung 4: the rungs below were done" in details
    assert "**Rung** 5 of 5: reboot" in details
    assert "**Approved** rung 5 by al" in details
    steps = re.findall(r"\*\*rung (\d) (\w+)\*\*", details)
    # never 2 again; the last: the rung under way, numbered as the details number it
    assert steps == [("1", "drain"), ("2", "reset_gpu"), ("4", "reset_gpu"), ("5", "reboot")]
    shown = timeline(NodeLadder(node="n1", runbook="gpu-6", status="x", **state_parts(state)))
    assert [line.split()[0] for line in shown if "reset_gpu" in line] == ["2", "4"]
    assert state.requested_rung(ApproveRequest(by="al", rung_number=5)) == 2
    behind = why_not_approve(state, ApproveRequest(by="al", rung_number=2, ahead=True))
    assert behind.startswith("rung 2 is behind the ladder, in a runbook it left")
    assert why_not_approve(state, ApproveRequest(by="al", rung_number=6, ahead=True)) == (
        "no rung 6 in the ladder (rungs 3 to 5; now at rung 5 (reboot), awaiting approval)"
    )


def state_parts(state: RemediationState) -> dict[str, object]:
    return {"attempts": state.attempts, "approvals": [], "escalations": state.escalations}


def drain() -> Rung:
    return Rung(action=Action.DRAIN)


def reset() -> Rung:
    return Rung(action=Action.RESET_GPU)
