"""With a keyring on the controller, an operator's decision counts only when signed by a key in
it: an unsigned approval, one signed by a key not in it, one signed for another rung or another
workflow, a stale one and one sent as a plain signal are refused, and the ladder records
nothing of them but the signal's refusal; a signed one records the keyring's name and the
key's fingerprint, whatever ``by`` said. On the time-skipping server, and the CLI's signing on
the dev server."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from contract.defs import UpdateRejected
from contract.messages import ABORT, ABORT_LADDER, APPROVE, APPROVE_RUNG
from remedy.core.models import Action
from remedy.ladder.remediation import Outcome, Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import AbortRequest, ApproveRequest
from remedy.trust.signing import (
    Decision,
    Keyring,
    Operator,
    Signature,
    Verb,
    private_key_bytes,
    public_blob,
    sign,
)
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.test_cli import cli
from tests.test_operator_updates import until_phase
from workers.show import NodeLadder, timeline

ALICE, MALLORY = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
KEYRING = Keyring(operators=[Operator(name="alice", key=public_blob(ALICE))], required=True)
WAITS = Runbook(
    name="reset-after-approval",
    match=Match(xids=[48]),
    watch=timedelta(0),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)
UPDATES = {EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED}


async def decision(env: WorkflowEnvironment, handle: Handle, **fields: object) -> Decision:
    """An approval of rung 1 of this run, now on the server's clock; ``fields`` change it."""
    run_id = (await handle.describe()).run_id
    said: dict[str, object] = {
        "workflow_id": handle.id,
        "run_id": run_id,
        "verb": Verb.APPROVE,
        "rung": 1,
        "epoch": 0,
        "text": "RMA 7",
        "at": await env.get_current_time(),
    }
    return Decision.model_validate({**said, **fields})


def edited(signature: Signature) -> Signature:
    claim = signature.decision.model_copy(update={"text": "forged"})
    return signature.model_copy(update={"decision": claim})


async def refused(handle: Handle, req: ApproveRequest) -> str:
    with pytest.raises(UpdateRejected) as refusal:
        await APPROVE_RUNG.execute(handle, req)
    return str(refusal.value)


async def test_only_a_decision_signed_by_a_key_in_the_keyring_counts(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    fleet = own_fleet("signed", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        good = await decision(time_env, handle)
        other = await decision(time_env, handle, workflow_id="remediation/other-node")
        stale = await decision(
            time_env, handle, at=good.at - timedelta(minutes=10)
        )  # a copy sent again later
        ask = ApproveRequest(by="alice", rung=1, note="RMA 7")
        reasons = [
            await refused(handle, ask),
            await refused(handle, ask.model_copy(update={"signature": sign(MALLORY, good)})),
            await refused(
                handle,
                ask.model_copy(
                    update={"rung": 2, "signature": sign(ALICE, good)}  # another rung's
                ),
            ),
            await refused(handle, ask.model_copy(update={"signature": sign(ALICE, other)})),
            await refused(handle, ask.model_copy(update={"signature": sign(ALICE, stale)})),
            await refused(  # words changed after signing, in the request and its claim
                handle,
                ask.model_copy(update={"note": "forged", "signature": edited(sign(ALICE, good))}),
            ),
        ]
        # A plain signal: refused whatever it carries, a key field included.
        await APPROVE.send(
            handle, ask.model_copy(update={"signature": sign(ALICE, good), "key": "forged"})
        )
        await ABORT.send(handle, AbortRequest(by="mallory", reason="go away"))
        with pytest.raises(UpdateRejected, match="unsigned"):
            await ABORT_LADDER.execute(handle, AbortRequest(by="mallory", reason="go away"))
        before = await state_of(handle)
        answer = await APPROVE_RUNG.execute(
            handle,
            ask.model_copy(update={"by": "someone-else", "signature": sign(ALICE, good)}),
        )
        result = await handle.result()
        accepted = [e async for e in handle.fetch_history_events() if e.event_type in UPDATES]
    assert reasons[0].startswith("unsigned")
    assert "not in the keyring" in reasons[1]
    assert "signed for rung 2, not 3" in reasons[2]
    assert "signed for workflow 'remediation/other-node'" in reasons[3]
    assert "stale" in reasons[4]
    assert reasons[5].startswith("the signature does not verify with alice's key")
    # Nothing of the refused ones reached the ladder: only the signals' refusal reasons.
    assert before.phase is Phase.AWAITING_APPROVAL and before.approvals == []
    assert [(r.verb, r.why) for r in before.refused] == [
        ("approve", "a approve signal is not taken with a keyring: send the signed update"),
        ("abort", "a abort signal is not taken with a keyring: send the signed update"),
    ]
    assert len(accepted) == 1  # the signed approval, and no refused update
    fingerprint = KEYRING.operators[0].fingerprint
    assert answer.by == f"alice [key {fingerprint}]"
    [approval] = result.approvals
    assert (approval.by, approval.key, approval.rung) == ("alice", fingerprint, 1)
    assert result.outcome is Outcome.RECOVERED


async def test_without_a_keyring_a_signal_is_checked_as_the_update_is_and_show_says_why(
    time_env: WorkflowEnvironment,
) -> None:
    client = time_env.client
    fleet = own_fleet("signals", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        await APPROVE.send(handle, ApproveRequest(by="mallory", rung_number=100, key="forged"))
        refused = await state_of(handle)
        await APPROVE.send(handle, ApproveRequest(by="carol", key="forged"))
        result = await handle.result()
    assert refused.approvals == [] and refused.phase is Phase.AWAITING_APPROVAL
    [refusal] = refused.refused
    no_such = (
        "no rung 100 in the ladder (rungs 1 to 2; now at rung 2 (reset_gpu), awaiting approval)"
    )
    assert (refusal.verb, refusal.why) == ("approve", no_such)
    lines = timeline(NodeLadder(node=node, runbook=None, status="x", refused=refused.refused))
    assert lines[-1].endswith(f"approve signal refused: {no_such}")
    [approval] = result.approvals  # the signal for the waiting rung counts, unverified
    assert approval.who == "carol [unverified]" and approval.key == ""


async def test_the_cli_signs_with_its_key_and_the_ladder_records_the_keyrings_name(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """On the dev server (the CLI signs with the wall clock, which the server's is)."""
    client = dev_env.client
    address = client.service_client.config.target_host
    key = tmp_path / "alice.key"
    key.write_bytes(private_key_bytes(ALICE))
    fleet = own_fleet("signed-cli", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        unsigned = await cli("approve", node, "--address", address, "--by", "alice")
        signed = await cli("approve", node, "--address", address, "--key", str(key))
        result = await handle.result()
    fingerprint = KEYRING.operators[0].fingerprint
    assert unsigned[0] == 2 and unsigned[1].startswith(f"error: {node}: unsigned")
    assert signed == (
        0,
        f"{node}: approved rung 2 (reset_gpu) by alice [key {fingerprint}]; ladder now acting\n",
    )
    assert [(a.by, a.key) for a in result.approvals] == [("alice", fingerprint)]


async def test_a_key_the_controller_cannot_check_is_said_not_dropped(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """No keyring on the controller: the signed approval goes through, recorded unverified,
    and the command says its --key was not checked."""
    client = dev_env.client
    address = client.service_client.config.target_host
    key = tmp_path / "alice.key"
    key.write_bytes(private_key_bytes(ALICE))
    fleet = own_fleet("signed-cli", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        code, said = await cli("approve", node, "--address", address, "--key", str(key))
        await handle.result()
    assert code == 0, said
    assert f"note: {node}: signed with {key}, but the controller has no keyring" in said
    assert "the decision is recorded [unverified]" in said
