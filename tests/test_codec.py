"""The payload codec: a job guard run through a client with the codec leaves only
``binary/encrypted`` payloads in its history, none holding the plaintext, and reads back in
clear through the same key file; keys rotate (the first encrypts, any listed decrypts); the
codec server decodes over HTTP for the Web UI, with CORS for its origin and a token."""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.names import job_guard_workflow_id
from remedy.attribution.guard import GuardInput, GuardPhase, GuardPolicy, JobRef
from remedy.attribution.model import PodFailure, Termination
from tests.conftest import running_workers
from tests.test_cli import cli
from workers.codec import (
    ENCODING,
    KEY_ID,
    CodecError,
    CodecKeyError,
    EncryptionCodec,
    data_converter,
    data_converter_from_env,
    load_keys,
)
from workers.codec_server import codec_app
from workflows.job_guard import JobGuard

CANARY = "plaintext-canary-7f3a"  # a word the job's pod wrote: it must not be in the history
UI = "http://localhost:8233"


def key_line(key_id: str) -> str:
    return f"{key_id} {base64.b64encode(os.urandom(32)).decode()}\n"


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text("# newest first\n" + key_line("k2") + key_line("k1"))
    return path


def payloads_in(message: Message) -> Iterator[tuple[str, Payload]]:
    """Every payload in a history event, with the field that holds it."""
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values())
        elif isinstance(value, Message):
            values = [value]
        else:  # a repeated field
            values = list(value)
        for v in values:
            if isinstance(v, Payload):
                yield field.name, v
            elif isinstance(v, Message):
                yield from payloads_in(v)


def is_patch_marker(event: HistoryEvent) -> bool:
    """A ``workflow.patched`` marker: the SDK's core writes its details (the patch's id) as
    plain JSON, past the codec; it holds nothing of the workflow's data."""
    marker = event.marker_recorded_event_attributes
    return event.HasField("marker_recorded_event_attributes") and marker.marker_name == "core_patch"


async def test_a_run_through_the_codec_leaves_only_ciphertext_in_history(
    time_env: WorkflowEnvironment, key_file: Path
) -> None:
    client = Client(**{**time_env.client.config(), "data_converter": data_converter(key_file)})
    fleet = SimFleet(nodes=1, pool=f"pool-{uuid.uuid4().hex[:8]}")
    job = JobRef(name=f"llm-{uuid.uuid4().hex[:6]}")
    failure = PodFailure(
        job=str(job),
        pod=f"{job.name}-0",
        node=sorted(fleet.nodes)[0],
        failed_at=await time_env.get_current_time(),
        termination=Termination(exit_code=137, reason="OOMKilled"),
        log_tail=f"{CANARY}: CUDA out of memory",
    )
    async with running_workers(client, fleet, jobs=SimJobs()) as queues:
        handle = await client.start_workflow(
            JobGuard.run,
            GuardInput(job=job, policy=GuardPolicy(), controller_task_queue=queues.controller),
            id=job_guard_workflow_id(job.namespace, job.name),
            task_queue=queues.controller,
        )
        await handle.signal(JobGuard.pod_failed, failure)
        result = await handle.result()  # an application failure: stopped
        history = await handle.fetch_history()
    assert result.phase is GuardPhase.STOPPED  # the workers read every payload in clear
    assert result.ledger.failures[0].pod == failure.pod
    found = [
        (name, p)
        for event in history.events
        if not is_patch_marker(event)
        for name, p in payloads_in(event)
        if name != "indexed_fields"  # search attributes: never encoded, by Temporal's design
    ]
    assert not [
        p.data
        for e in history.events
        if is_patch_marker(e)
        for _, p in payloads_in(e)
        if CANARY.encode() in p.data
    ]
    assert len(found) >= 4  # input, signal, activities, result
    assert {p.metadata["encoding"] for _, p in found} == {ENCODING}
    assert {p.metadata[KEY_ID] for _, p in found} == {b"k2"}  # the first key encrypts
    assert all(CANARY.encode() not in p.data for _, p in found)
    raw = b"".join(event.SerializeToString() for event in history.events)
    assert CANARY.encode() not in raw
    codec = client.data_converter.payload_codec
    assert codec is not None
    [signal] = [
        e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    sealed = signal.workflow_execution_signaled_event_attributes.input.payloads
    [opened] = await codec.decode(list(sealed))
    assert CANARY.encode() in opened.data  # the key file opens it


async def test_keys_rotate_and_a_payload_is_bound_to_its_key(tmp_path: Path) -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')
    old = tmp_path / "old"
    old.write_text(key_line("k1"))
    [sealed] = await EncryptionCodec(load_keys(old)).encode([plain])
    rotated = tmp_path / "rotated"
    rotated.write_text(key_line("k2") + old.read_text())
    codec = EncryptionCodec(load_keys(rotated))
    assert await codec.decode([sealed]) == [plain]  # an old payload, after rotation
    [new] = await codec.encode([plain])
    assert new.metadata[KEY_ID] == b"k2"
    assert await codec.decode([plain]) == [plain]  # written before encryption: as it is
    with pytest.raises(CodecError, match="'k2', which the key file lacks"):
        await EncryptionCodec(load_keys(old)).decode([new])
    relabelled = Payload(metadata={**new.metadata, KEY_ID: b"k1"}, data=new.data)
    with pytest.raises(CodecError, match="does not decrypt"):
        await codec.decode([relabelled])
    assert data_converter_from_env({"REMEDY_CODEC_KEY_FILE": str(old)}).payload_codec
    assert data_converter_from_env({}).payload_codec is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "no key"),
        ("k1\n", "keys:1: expected 'ID BASE64', found 1 fields"),
        ("# c\nk1 not-base64!\n", "keys:2: key 'k1' is not base64"),
        ("k1 " + base64.b64encode(b"short").decode(), "key 'k1' has 5 bytes, not 32"),
        (key_line("k1") + key_line("k1"), "keys:2: key id 'k1' used twice"),
    ],
    ids=["empty", "no-key", "not-base64", "short", "twice"],  # not the random keys: xdist's
)
def test_a_bad_key_file_says_where(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(CodecKeyError, match=error):
        load_keys(path)


async def test_the_codec_server_decodes_for_the_web_ui(key_file: Path) -> None:
    codec = EncryptionCodec(load_keys(key_file))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'{"log_tail": "x"}')
    sealed = await codec.encode([plain])
    body = json_format.MessageToJson(Payloads(payloads=sealed))
    app = codec_app(codec, origins=[UI], token="t0k", encode=True)
    async with TestClient(TestServer(app)) as http:
        preflight = await http.options(
            "/decode", headers={"Origin": UI, "Access-Control-Request-Method": "POST"}
        )
        refused = await http.post("/decode", data=body, headers={"Origin": UI})
        decoded = await http.post(
            "/default/decode",
            data=body,
            headers={"Origin": UI, "Authorization": "Bearer t0k", "X-Namespace": "default"},
        )
        stranger = await http.post(
            "/encode",
            data=json_format.MessageToJson(Payloads(payloads=[plain])),
            headers={"Origin": "http://evil.example", "Authorization": "Bearer t0k"},
        )
        garbled = await http.post("/decode", data="{", headers={"Authorization": "Bearer t0k"})
        assert preflight.status == 204
        assert preflight.headers["Access-Control-Allow-Origin"] == UI
        assert "X-Namespace" in preflight.headers["Access-Control-Allow-Headers"]
        assert refused.status == 401
        assert decoded.status == 200 and decoded.headers["Access-Control-Allow-Origin"] == UI
        answer = json_format.Parse(await decoded.text(), Payloads())
        assert list(answer.payloads) == [plain]
        assert stranger.status == 200 and "Access-Control-Allow-Origin" not in stranger.headers
        encoded = json_format.Parse(await stranger.text(), Payloads())
        assert encoded.payloads[0].metadata["encoding"] == ENCODING
        assert garbled.status == 400


async def test_the_codec_server_command_refuses_a_bad_key_file(tmp_path: Path) -> None:
    bad = tmp_path / "keys"
    bad.write_text("k1 short\n")
    code, output = await cli("codec-server", "--key-file", str(bad))
    assert code == 1
    assert output.strip().startswith("error: --key-file:") and len(output.strip().splitlines()) == 1


def test_the_converter_is_remedys_with_the_codec(key_file: Path) -> None:
    converter = data_converter(key_file)
    plain = data_converter(None)
    assert isinstance(converter.payload_codec, EncryptionCodec)
    assert converter.payload_converter_class is plain.payload_converter_class  # pydantic
    assert plain.payload_codec is None


def test_a_bad_codec_key_file_stops_a_command_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect_with reads REMEDY_CODEC_KEY_FILE: a key file it cannot use is one line, exit 4,
    before anything is sent."""
    from typer.testing import CliRunner

    from workers.cli import app

    bad = tmp_path / "keys"
    bad.write_text("k1 not-base64!\n")
    monkeypatch.setenv("REMEDY_CODEC_KEY_FILE", str(bad))
    result = CliRunner().invoke(app, ["status", "--address", "127.0.0.1:1"])
    assert result.exit_code == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "REMEDY_CODEC_KEY_FILE" in lines[0] and str(bad) in lines[0]
