"""One rung numbering for people: the Web UI's details, `remedy show`, `approve`'s answer (and
its ``--rung``) and `explain` name the same number for the same rung, counted from 1; the wire
keeps the ladder's index."""

from __future__ import annotations

import re
from pathlib import Path

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from remedy.remediation import Outcome
from tests.conftest import own_fleet, running_workers
from tests.test_cli import RUNBOOK, awaiting_approval, cli, trigger


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
        await trigger(node, tmp_path, address, queues)
        handle = await awaiting_approval(client, node)
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        waiting = await cli("show", node, "--address", address)
        approved = await cli("approve", node, "--rung", "2", "--address", address, "--by", "al")
        assert approved[0] == 0, approved  # before: index 2, "no rung 2 in the ladder"
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
    assert shown == {"cordon": "-", "drain": "1"}
    after = done[1].splitlines()
    assert any(re.match(r"\s*2 \d\d:\d\d:\d\d approved by al ", line) for line in after)
    assert any(re.match(r"\s*2 \d\d:\d\d:\d\d reset_gpu ", line) for line in after)
    assert explained[0] == 0
    assert re.search(r"rung 2: .*reset", explained[1]) and "rung 3" not in explained[1]
