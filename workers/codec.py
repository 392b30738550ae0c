"""Optional payload encryption: every payload remedy's processes write (workflow inputs, results,
signals, activity arguments) is sealed with AES-256-GCM before it leaves the process, so the
Temporal server and its database hold only ciphertext. Redaction (remedy.redaction) happens
before and apart from it: what a history must never hold is removed even where encryption is off
or a reader has the key.

Keys come from a key file, one key a line, ``ID BASE64`` (32 random bytes)::

    # newest first: it encrypts; every key listed decrypts
    2026-11 qk3b0W9yJm6tKf0yq7yGQ4Bc0dVNf5xjVYJgq7u3Y9E=
    2026-05 3mZy2E0S5nJtQ6m1yA0l8b7Rk3F2cUuW1oX4pV9dLhs=

Each payload carries its key's id (metadata ``encryption-key-id``), so a key is rotated by
putting a new one first and dropping the old one once no history still needed holds it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

from contract.defs import REJECTED, RETRY
from remedy.redaction import Redactor

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
KEY_FILE_ENV = "REMEDY_CODEC_KEY_FILE"
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's standard nonce, random per payload
TAG_BYTES = 16  # GCM's tag, after the ciphertext
MAX_KEY_FILE = 64 * 1024


class CodecKeyError(ValueError):
    """A key file that cannot be used: ``FILE:LINE: problem``."""


class CodecError(ValueError):
    """A payload that cannot be decrypted: its key is not in the key file, it was altered, or
    it is no ciphertext of this codec's at all. The message never quotes the payload's data."""


@dataclass(frozen=True)
class CodecKey:
    id: str
    secret: bytes = dataclasses.field(repr=False)


def load_keys(path: Path) -> list[CodecKey]:
    """The keys of ``path``, newest (the encrypting one) first; at least one."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_KEY_FILE + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CodecKeyError(f"{path}: cannot read: {exc}") from None
    if len(raw) > MAX_KEY_FILE:
        raise CodecKeyError(f"{path}: too large (the limit is {MAX_KEY_FILE} bytes)")
    keys: list[CodecKey] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not (line := line.strip()) or line.startswith("#"):
            continue
        keys.append(_key(line, f"{path}:{number}", {k.id for k in keys}))
    if not keys:
        raise CodecKeyError(f"{path}: no key (one a line: ID BASE64-OF-{KEY_BYTES}-BYTES)")
    return keys


def _key(line: str, where: str, seen: set[str]) -> CodecKey:
    parts = line.split()
    if len(parts) != 2:
        raise CodecKeyError(f"{where}: expected 'ID BASE64', found {len(parts)} fields")
    key_id, encoded = parts
    if key_id in seen:
        raise CodecKeyError(f"{where}: key id {key_id!r} used twice")
    try:
        secret = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise CodecKeyError(f"{where}: key {key_id!r} is not base64") from None
    if len(secret) != KEY_BYTES:
        raise CodecKeyError(f"{where}: key {key_id!r} has {len(secret)} bytes, not {KEY_BYTES}")
    return CodecKey(id=key_id, secret=secret)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM with the first key; decrypts with whichever key the payload names. The key
    id is authenticated with the payload (associated data): a relabelled payload fails."""

    def __init__(self, keys: Sequence[CodecKey]) -> None:
        if not keys:
            raise ValueError("an encryption codec needs at least one key")
        self._encrypting = keys[0]
        self._ciphers = {k.id: AESGCM(k.secret) for k in keys}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        key = self._encrypting
        cipher = self._ciphers[key.id]
        out = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            sealed = cipher.encrypt(nonce, payload.SerializeToString(), key.id.encode())
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, KEY_ID: key.id.encode()},
                    data=nonce + sealed,
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._open(p) for p in payloads]

    def _open(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was on: read as it is
        key_id = payload.metadata.get(KEY_ID, b"").decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecError(f"payload encrypted with key {key_id!r}, which the key file lacks")
        if len(payload.data) < NONCE_BYTES + TAG_BYTES:  # AESGCM raises ValueError on a short nonce
            raise CodecError(
                f"payload with key {key_id!r} has {len(payload.data)} bytes: too short to be a "
                f"ciphertext (a {NONCE_BYTES}-byte nonce and a {TAG_BYTES}-byte tag at least)"
            )
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            plain = cipher.decrypt(nonce, sealed, key_id.encode())
        except InvalidTag:
            raise CodecError(f"payload with key {key_id!r} does not decrypt: altered") from None
        try:
            return Payload.FromString(plain)
        except DecodeError:  # sealed with our key, but not by this codec
            raise CodecError(f"payload with key {key_id!r} decrypts to no payload") from None


class RedactingFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, each failure's message and stack trace redacted (the
    default rules) before they are written: an activity's error quotes a tool's stderr, and a
    failure is no payload, so redaction is all that stands between it and the history.

    A refusal (a validator's ``REJECTED``: nothing to approve, the ladder is finished) is an
    answer, not a fault: it keeps its reason and loses its stack trace, which the Web UI would
    show the operator as the worker's traceback and file paths."""

    encrypting: ClassVar[bool] = False
    _redactor = Redactor()

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=False)  # done below, after redacting

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        exception = unreadable_input(exception) or exception
        super().to_failure(exception, payload_converter, failure)  # causes come back through here
        message = self._redactor.text(failure.message)
        refusal = failure.application_failure_info.type in ANSWERS or _no_handler(exception)
        stack_trace = "" if refusal else self._redactor.text(failure.stack_trace)
        if not self.encrypting:
            failure.message, failure.stack_trace = message, stack_trace
            return
        # As encode_common_attributes does: the text moves into a payload, which the codec seals.
        common = {"message": message, "stack_trace": stack_trace}
        failure.encoded_attributes.CopyFrom(payload_converter.to_payloads([common])[0])
        failure.message, failure.stack_trace = "Encoded failure", ""


# Refusals that answer the caller (the Web UI shows their stack trace as the worker's): a
# validator's reason, and "send it again" while the ladder reads its keyring.
ANSWERS = frozenset({REJECTED, RETRY})


def unreadable_input(exception: BaseException) -> ApplicationError | None:
    """An update whose input does not read as its type (the Web UI's JSON without ``by``, a
    number as text), as a refusal in one line: which fields and why, never the input (the
    operator models hide it) nor the decoding traceback. None for anything else."""
    cause = exception.__cause__
    if not (
        isinstance(exception, RuntimeError)
        and str(exception) == "Failed decoding arguments"
        and isinstance(cause, ValidationError)
    ):
        return None
    fields = [
        f"{'.'.join(str(p) for p in e['loc']) or '(the input)'}: {e['msg']}" for e in cause.errors()
    ]
    return ApplicationError(
        f"not a valid {cause.title}: {'; '.join(fields[:5])}", type=REJECTED, non_retryable=True
    )


def _no_handler(exception: BaseException) -> bool:
    """An update of a name the workflow has no handler for (a typo in the Web UI): its message
    names the updates it knows; its stack trace is the SDK's."""
    return isinstance(exception, RuntimeError) and "expected but not found" in str(exception)


class EncryptedFailureConverter(RedactingFailureConverter):
    """With the codec on: a failure's message and stack trace encrypted as payloads are."""

    encrypting = True


def data_converter(key_file: Path | None) -> DataConverter:
    """remedy's converter (pydantic, failures redacted), encrypting with the keys of
    ``key_file`` (None: plain), failure messages included."""
    if key_file is None:
        return dataclasses.replace(
            pydantic_data_converter, failure_converter_class=RedactingFailureConverter
        )
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=EncryptionCodec(load_keys(key_file)),
        failure_converter_class=EncryptedFailureConverter,
    )


def codec_problem(exc: BaseException) -> str | None:
    """What ``exc`` says about this process's key, in one line: a payload sealed with a key the
    key file lacks, or sealed while this process has no key file; None for anything else."""
    seen: BaseException | None = exc
    for _ in range(8):  # the SDK wraps a decode failure once or twice
        if seen is None:
            return None
        if isinstance(seen, CodecError):
            return f"{KEY_FILE_ENV}: {seen}"
        if isinstance(seen, KeyError) and ENCODING.decode() in str(seen):
            return f"{KEY_FILE_ENV}: the payloads are encrypted and this process has no key file"
        seen = seen.__cause__ or seen.__context__
    return None


def data_converter_from_env(environ: Mapping[str, str] = os.environ) -> DataConverter:
    """As ``data_converter``, the key file named by ``REMEDY_CODEC_KEY_FILE`` (unset or empty:
    no encryption). Raises CodecKeyError for a file it cannot use."""
    path = environ.get(KEY_FILE_ENV, "")
    return data_converter(Path(path) if path else None)
