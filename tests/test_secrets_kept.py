"""Keys and tokens kept where they belong: the codec server wants a token unless it binds
loopback and serves no /encode unless asked; a codec key file that cannot open the payloads
(wrong, or none) is one line and exit 4; an API key never crosses the network in clear text by
accident; no repr and no log line holds the API key, the codec key or the server's token."""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from adapters.sim import SimFleet
from remedy.ladder.remediation import Phase
from tests.conftest import running_workers
from tests.ladder import report, wait_for_phase
from tests.test_cli import WAITS, cli
from tests.test_codec import key_line
from workers.cli import app
from workers.codec import EncryptionCodec, data_converter, load_keys
from workers.codec_server import codec_app, loopback
from workers.connection import ConnectOptions, resolve

API_KEY = "tmprl-apikey-" + "Q7" * 16
TOKEN = "codec-token-" + "Zx9" * 8


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text(key_line("k1"))
    return path


@pytest.mark.parametrize("bind", ["0.0.0.0:8888", "10.1.2.3:8888", "codec.example.com:8888"])
async def test_the_codec_server_wants_a_token_off_loopback(key_file: Path, bind: str) -> None:
    code, said = await cli("codec-server", "--key-file", str(key_file), "--bind", bind)
    assert code == 1
    [line] = said.strip().splitlines()
    assert line.startswith(f"error: --bind {bind}: not a loopback address, and no --token-file")


def test_loopback_is_this_machine_only() -> None:
    assert all(map(loopback, ["127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"]))
    assert not any(map(loopback, ["0.0.0.0", "::", "10.0.0.1", "codec.internal"]))


async def test_encode_is_served_only_when_asked(key_file: Path) -> None:
    codec = EncryptionCodec(load_keys(key_file))
    body = json_format.MessageToJson(Payloads(payloads=[Payload(data=b'"x"')]))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with TestClient(TestServer(codec_app(codec, token=TOKEN))) as http:
        off = await http.post("/encode", data=body, headers=auth)
        namespaced = await http.post("/default/encode", data=body, headers=auth)
        decode = await http.post("/decode", data=body, headers=auth)
    async with TestClient(TestServer(codec_app(codec, token=TOKEN, encode=True))) as http:
        on = await http.post("/encode", data=body, headers=auth)
    assert (off.status, namespaced.status, decode.status, on.status) == (404, 404, 200, 200)


@pytest.mark.parametrize("key", ["none", "wrong"])
async def test_a_key_file_that_cannot_open_the_payloads_is_one_line_and_exit_4(
    time_env: WorkflowEnvironment,
    key_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
) -> None:
    client = Client(**{**time_env.client.config(), "data_converter": data_converter(key_file)})
    fleet = SimFleet(nodes=1, pool=f"pool-{uuid.uuid4().hex[:8]}")
    node = sorted(fleet.nodes)[0]
    if key == "wrong":
        other = tmp_path / "other"
        other.write_text(key_line("k9"))
        monkeypatch.setenv("REMEDY_CODEC_KEY_FILE", str(other))
    address = client.service_client.config.target_host
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["show", node, "--address", address]
        )
    assert result.exit_code == 4  # no connection: the codec key cannot open what it reads
    [line] = result.stderr.strip().splitlines()
    words = "which the key file lacks" if key == "wrong" else "this process has no key file"
    assert line.startswith("error: REMEDY_CODEC_KEY_FILE: ") and words in line


def test_an_api_key_over_plain_text_is_refused_unless_allowed() -> None:
    runner = CliRunner()
    refused = runner.invoke(
        app, ["--api-key", API_KEY, "--no-tls", "status", "--address", "127.0.0.1:1"]
    )
    allowed = runner.invoke(
        app,
        ["--api-key", API_KEY, "--no-tls", "--allow-insecure-api-key", "status"]
        + ["--address", "127.0.0.1:1"],
    )
    assert refused.exit_code == 4
    [line] = refused.stderr.strip().splitlines()
    assert "clear text" in line and "--allow-insecure-api-key" in line
    assert allowed.exit_code == 4 and "cannot reach Temporal" in allowed.stderr
    assert API_KEY not in refused.output + allowed.output


async def test_no_repr_and_no_log_holds_a_key_or_a_token(
    key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    options = ConnectOptions(api_key=API_KEY, address="127.0.0.1:1")
    connection = resolve(options, "cli", {})
    codec = EncryptionCodec(load_keys(key_file))
    secret = key_file.read_text().split()[1]
    sealed = await codec.encode([Payload(data=b'"x"')])
    body = json_format.MessageToJson(Payloads(payloads=sealed))
    async with TestClient(TestServer(codec_app(codec, token=TOKEN))) as http:
        await http.post("/decode", data=body, headers={"Authorization": f"Bearer {TOKEN}"})
        await http.post("/decode", data=body, headers={"Authorization": "Bearer wrong"})
    code, said = await cli("--api-key", API_KEY, "status", "--address", "127.0.0.1:1")
    logging.getLogger("remedy.test").info("resolved %r from %r", connection, options)
    assert code == 4 and API_KEY not in said
    shown = repr(connection) + repr(options) + repr(load_keys(key_file)) + caplog.text
    assert "aiohttp.access" in caplog.text  # the server's requests were logged, and
    for kept in (API_KEY, TOKEN, secret, base64.b64decode(secret).hex()):
        assert kept not in shown
