"""A refused update reaches its caller — the CLI, or the Web UI's "Send an Update" — as one
readable reason: an ``ApplicationError`` whose message is the validator's reason, with no
Python traceback or file paths of the worker (the UI printed both on a refusal)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from contract.defs import REJECTED, UpdateRejected
from contract.messages import APPROVE_RUNG
from remedy.ladder.remediation import Phase
from remedy.trust.decisions import ApproveRequest
from tests.conftest import own_fleet, running_workers
from tests.ladder import report
from tests.test_codec import key_line
from tests.test_operator_updates import TOLERATES, until_phase
from workers.codec import data_converter


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "codec"])
async def test_a_refused_approval_is_its_reason_alone(
    time_env: WorkflowEnvironment, tmp_path: Path, encrypted: bool
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(key_line("k1"))
    converter = data_converter(key_file if encrypted else None)
    client = Client(**{**time_env.client.config(), "data_converter": converter})
    fleet = own_fleet("refusal", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), TOLERATES)
        await until_phase(handle, Phase.TOLERATING)
        with pytest.raises(UpdateRejected):  # the ladder reads its keyring: judged from now on
            await APPROVE_RUNG.execute(handle, ApproveRequest(by="alice", rung=0))
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(APPROVE_RUNG.name, ApproveRequest(by="alice", rung=0))
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == REJECTED
    assert cause.non_retryable
    assert cause.message.startswith("rung 1 (drain) needs no approval")
    # What the server keeps and the UI shows (the codec's, once its codec server opened it).
    assert cause.failure is not None and cause.failure.application_failure_info.type == REJECTED
    assert "Traceback" not in cause.message and ".py" not in cause.message
    assert not cause.failure.stack_trace
    assert not cause.failure.HasField("cause")
