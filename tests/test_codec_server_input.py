"""The codec server answers 400, saying what was wrong and quoting none of it, to every kind of
malformed input — before, a ciphertext too short or not a payload answered 500 with a
traceback in its log — and still 500 to a fault of its own."""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from workers.codec import ENCODING, KEY_ID, EncryptionCodec, load_keys
from workers.codec_server import codec_app

SECRET = b"canary-3f9e"  # in the inputs: never in an answer


def sealed(key_id: str, data: bytes) -> dict[str, object]:
    """A payload that says it is encrypted with ``key_id``, holding ``data``."""
    return {
        "metadata": {
            "encoding": base64.b64encode(ENCODING).decode(),
            KEY_ID: base64.b64encode(key_id.encode()).decode(),
        },
        "data": base64.b64encode(data).decode(),
    }


def body(*payloads: dict[str, object]) -> str:
    return json.dumps({"payloads": list(payloads)})


MALFORMED = {
    "an empty body": ("", "empty"),
    "a body that is not JSON": ("{" + SECRET.decode(), "not JSON"),
    "JSON that is not an object": ("[1, 2]", "not a JSON object"),
    "JSON that is no Payloads": (json.dumps({"payloadz": SECRET.decode()}), "not a Payloads"),
    "data that is not base64": (  # one character: no base64 at all, even to a lenient reader
        json.dumps({"payloads": [{"metadata": {"x": SECRET.decode()}, "data": "a"}]}),
        "not base64",
    ),
    "a key the key file lacks": (body(sealed("k9", os.urandom(64))), "lacks"),
    "a ciphertext too short": (body(sealed("k1", SECRET)), "too short"),
    "a ciphertext altered": (body(sealed("k1", os.urandom(12) + SECRET * 4)), "altered"),
}


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text(f"k1 {base64.b64encode(os.urandom(32)).decode()}\n")
    return path


@pytest.mark.parametrize("sent", MALFORMED.values(), ids=list(MALFORMED))
async def test_malformed_input_is_a_400_that_quotes_none_of_it(
    key_file: Path, sent: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    text, said = sent
    app = codec_app(EncryptionCodec(load_keys(key_file)))
    async with TestClient(TestServer(app)) as http:
        answer = await http.post("/decode", data=text)
        error = (await answer.json())["error"]
    assert answer.status == 400
    assert said in error and SECRET.decode() not in error
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]


async def test_a_payload_sealed_by_the_key_that_is_no_payload_is_a_400(key_file: Path) -> None:
    """Encrypted with the codec's own key and id, but not a Payload inside (it decrypts)."""
    codec = EncryptionCodec(load_keys(key_file))
    [real] = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=b"1")])
    key = base64.b64decode(key_file.read_text().split()[1])
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(12)
    junk = nonce + AESGCM(key).encrypt(nonce, b"\xff\xff\xff" + SECRET, b"k1")
    forged = Payload(metadata=dict(real.metadata), data=junk)
    text = json_format.MessageToJson(Payloads(payloads=[forged]))
    async with TestClient(TestServer(codec_app(codec))) as http:
        answer = await http.post("/decode", data=text)
        error = (await answer.json())["error"]
    assert answer.status == 400 and "decrypts to no payload" in error


async def test_a_fault_of_the_servers_own_is_still_a_500(
    key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(EncryptionCodec):
        async def decode(self, payloads: object) -> list[Payload]:  # type: ignore[override]
            raise RuntimeError("a bug of ours")

    caplog.set_level(logging.ERROR)
    app = codec_app(Broken(load_keys(key_file)))
    async with TestClient(TestServer(app)) as http:
        answer = await http.post("/decode", data=body())
    assert answer.status == 500
