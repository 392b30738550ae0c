"""No secret of the corpus (tests/data/secret-corpus.yaml) reaches a history, by any free-text
path, with or without the codec: a ladder started by `remedy trigger` whose reason holds
secrets, on a node whose reset tool fails with secrets on its stderr and whose kernel log
prints Xid lines quoting them, approved through a raw update (what the `temporal` CLI or the
Web UI sends, past remedy's CLI) whose note holds them and aborted by `remedy abort` with a
reason that does. (A pod's log tail, which the fleet scan gathers on the dev server, is
tests/test_redaction_history.py's, with the same corpus.) With the codec on,
every payload and every failure's message is opened with the key and read too: encryption
hides nothing that redaction let through."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from adapters.host.local import _run
from adapters.sim import SimFleet
from adapters.sim.host import SimHost
from contract.messages import APPROVE_RUNG
from contract.names import remediation_workflow_id
from remedy.ladder.remediation import Outcome, Phase
from remedy.redaction import MAX_OPERATOR_TEXT
from remedy.runbook import load_runbooks
from tests.conftest import pool_known, running_workers
from tests.ladder import state_of, wait_for_phase
from tests.test_cli import cli
from tests.test_codec import key_line, payloads_in
from tests.test_redaction_corpus import SECRETS
from workers.codec import ENCODING, data_converter

TEXTS = [c.text.replace("\n", " ") for c in SECRETS]  # operator text is one line

RUNBOOK = """\
name: secret-ladder
description: a reset whose tool fails, then a reboot and a replacement that wait for a person
match:
  - checks: [manual]
cordon: true
tolerance: 0s
watch: 0s
ladder:
  - action: reset_gpu
    timeout: 5m
  - action: reboot
    approval: required
    approval_timeout: 8h
    settle: 1m
  - action: replace
    approval: required
    approval_timeout: 8h
"""


def chunks(texts: list[str], limit: int = MAX_OPERATOR_TEXT) -> list[str]:
    """The texts joined into as few lines under ``limit`` as they fit in."""
    out = [""]
    for text in texts:
        joined = f"{out[-1]} | {text}" if out[-1] else text
        if len(joined) > limit:
            out.append(text)
        else:
            out[-1] = joined
    return out


class FailingTool(SimHost):
    """A node whose reset tool exits 3 with ``stderr`` on its stderr (the real runner)."""

    stderr: Path

    def reset_gpus(self, indices: list[int], key: str) -> str:
        _run(["sh", "-c", f"cat {self.stderr} >&2; exit 3"], 10)
        raise AssertionError("the tool exits 3")


class Fleet(SimFleet):
    def host(self, name: str) -> SimHost:
        return FailingTool(self, name)


async def opened(client: Client, history: History) -> bytes:
    """Every event as stored, and with the codec: every payload opened with the key."""
    raw = [e.SerializeToString() for e in history.events]
    codec = client.data_converter.payload_codec
    sealed: list[Payload] = [p for e in history.events for _, p in payloads_in(e)]
    if codec is not None:
        sealed = [p for p in sealed if p.metadata.get("encoding") == ENCODING]
        raw += [p.SerializeToString() for p in await codec.decode(sealed)]
    return b"".join(raw)


def failures(history: History) -> Iterator[str]:
    for event in history.events:
        if event.HasField("activity_task_failed_event_attributes"):
            yield event.activity_task_failed_event_attributes.failure.message


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "codec"])
async def test_no_corpus_secret_reaches_a_history_by_any_path(
    time_env: WorkflowEnvironment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    encrypted: bool,
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(key_line("k1"))
    if encrypted:  # the CLI's commands read it as every remedy process does
        monkeypatch.setenv("REMEDY_CODEC_KEY_FILE", str(key_file))
    converter = data_converter(key_file if encrypted else None)
    client = Client(**{**time_env.client.config(), "data_converter": converter})
    address = client.service_client.config.target_host
    reason, note, abort_reason = chunks(TEXTS)
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "secret-ladder.yaml").write_text(RUNBOOK)
    FailingTool.stderr = tmp_path / "stderr"
    FailingTool.stderr.write_text("\n".join(TEXTS[-6:]))  # the tail the error quotes
    fleet = Fleet(nodes=1, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node = sorted(fleet.nodes)[0]
    fleet.log_kernel(
        node,
        *(
            f"NVRM: Xid (PCI:0000:38:00): 13, pid=4242, name=python3 {text}, Graphics SM "
            "Warp Exception on (GPC 0, TPC 1)"
            for text in TEXTS
        ),
    )
    async with running_workers(client, fleet) as queues:
        queues.known.add(*load_runbooks([tmp_path / "runbooks"]))  # the controller climbs its own
        await pool_known(client, queues)  # trigger takes only a pool remedy knows
        code, said = await cli(
            "trigger", node, "--runbook", "secret-ladder", "--reason", reason,
            "--pool", queues.pool, "--address", address,
            "--runbooks", str(tmp_path / "runbooks"),
            "--task-queue", queues.controller, "--node-task-queue", queues.agents,
        )  # fmt: skip
        assert code == 0, said
        handle = client.get_workflow_handle(remediation_workflow_id(node))
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)  # type: ignore[arg-type]
        raw = {"by": "mallory", "note": note}  # as another client sends it: no remedy CLI
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(APPROVE_RUNG.name, raw)
        code, said = await cli("approve", node, "--address", address, "--note", note)
        assert code == 0, said
        await wait_for_phase(
            time_env,
            handle,  # type: ignore[arg-type]
            Phase.AWAITING_APPROVAL,
            step=timedelta(minutes=1),
        )
        code, said = await cli("abort", node, "--address", address, "--reason", abort_reason)
        assert code == 0, said
        state = await state_of(handle)  # type: ignore[arg-type]
        ladder = await handle.fetch_history()
    assert state.outcome is Outcome.ABORTED
    # The decoder's refusal: one line, no cause under it since issue 52 (workers/codec.py)
    why = " / ".join(str(e) for e in _causes(refused.value.cause))
    assert "looks like a secret" in why and all(c.secret not in why for c in SECRETS)
    kept = await opened(client, ladder)
    leaked = [c.secret for c in SECRETS if c.secret.encode() in kept]
    assert leaked == []
    for kind in {c.kind for c in SECRETS}:  # every path ran, and redacted what it carried
        assert f"[REDACTED:{kind}]".encode() in kept, kind
    [failed] = failures(ladder)  # the reset tool's error
    if encrypted:
        assert failed == "Encoded failure"  # its message sealed with the payloads
    else:
        assert "exited 3: " in failed and "[REDACTED:" in failed


def _causes(error: BaseException | None) -> list[BaseException]:
    """An error and the causes under it, outermost first."""
    chain: list[BaseException] = []
    while error is not None and len(chain) < 5:
        chain.append(error)
        error = getattr(error, "cause", None) or error.__cause__
    return chain
