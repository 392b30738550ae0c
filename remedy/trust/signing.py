"""Signed operator decisions: an approval, abort or clear that says who made it as a fact.

An operator signs a ``Decision`` — which workflow run, what (verb, rung, runbook epoch, the
note or reason), and when — with an Ed25519 key (an OpenSSH key file, as ``ssh-keygen -t
ed25519`` or ``remedy keys generate`` writes). The controller holds a ``Keyring``: public keys
and the name each belongs to, one OpenSSH public-key line per operator::

    # remedy operator keyring: one line per key, the last field is the operator's name
    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... alice
    ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... bob

The workflow rebuilds the decision from what it knows (its own id and run, the rung, the
request's text) and checks the signature with ``Keyring.why_not``: pure computation, no clock
read (the time comes in), so a workflow's validator can run it. The name it records is the
keyring's and the key's fingerprint (``SHA256:…``, as ``ssh-keygen -lf`` prints it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from remedy.core.models import Frozen

# A signature this far from the workflow's clock (either way: operators' clocks drift) is
# stale: a copy of one cannot be sent again later.
FRESH_FOR = timedelta(minutes=5)
KEY_TYPE = "ssh-ed25519"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
_VERSION = "remedy-decision-1"  # in the signed bytes: a signature for anything else never fits
# An approval signed for its rung's number, from 1 (remedy.core.numbering), not the index from 0.
_VERSION_NUMBERED = "remedy-decision-2"


class Verb(StrEnum):
    APPROVE = "approve"
    ABORT = "abort"
    CLEAR = "clear"
    TRIGGER = "trigger"  # a ladder started by hand (remedy trigger): its report's digest signed


class SigningError(ValueError):
    """A key file or keyring that cannot be used; the message says which and why."""


class Decision(Frozen):
    """What an operator signs. ``rung_number`` and ``epoch`` for an approval; ``text`` is the
    note or reason (so a signature cannot be reused with other words); ``restore`` and
    ``no_hold`` an abort's (``no_hold`` is in the signed bytes only when set: signatures made
    before it still verify). ``rung``: the rung's index, from 0, as clients of the release
    before signed it."""

    workflow_id: str
    run_id: str
    verb: Verb
    rung: int | None = None
    rung_number: int | None = None  # the rung as people count it, from 1
    epoch: int | None = None
    text: str = ""
    restore: bool = False
    no_hold: bool = False  # an abort that leaves the node to the next report (person_hold)
    at: datetime

    def message(self) -> bytes:
        """The canonical bytes signed: sorted JSON, the time in whole UTC seconds."""
        numbered = self.rung_number is not None  # the bytes of the release before, else
        left_out = {"at", "rung" if numbered else "rung_number"} | (
            set() if self.no_hold else {"no_hold"}
        )
        fields = self.model_dump(mode="json", exclude=left_out)
        fields["at"] = self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        fields["v"] = _VERSION_NUMBERED if numbered else _VERSION
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


class Signature(Frozen):
    """A signed decision as a request carries it: the claim, the key's fingerprint, the
    signature (base64)."""

    decision: Decision
    key: str
    value: str


class KeyringWanted(Frozen):
    """The ``load_keyring`` signal: read the operator keyring anew (no input)."""


class Operator(Frozen):
    """One keyring entry: a person's name and their public key (the OpenSSH base64 blob)."""

    name: str
    key: str

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.key)


class Keyring(Frozen):
    """The operators whose decisions count. ``required`` False: no keyring is configured (the
    demo) and decisions are recorded unverified; True with no operators refuses every one."""

    operators: list[Operator] = []
    required: bool = False

    def signer(self, key: str) -> Operator | None:
        return next((o for o in self.operators if o.fingerprint == key), None)

    def why_not(self, signature: Signature | None, expected: Decision, now: datetime) -> str:
        """Why ``signature`` does not make ``expected`` (its ``at`` aside) an operator's
        decision at ``now`` (empty: it does). For example, a signature made for rung 2 sent
        with an approval of rung 3 is refused with "signed for rung_number 2, not 3"."""
        if signature is None:
            return "unsigned: this workflow takes only decisions signed by a key in its keyring"
        operator = self.signer(signature.key)
        if operator is None:
            return f"signed by key {signature.key}, which is not in the keyring"
        claim = signature.decision
        for field in Decision.model_fields:
            said, wanted = getattr(claim, field), getattr(expected, field)
            if said != wanted and field == "rung":  # as people count rungs (from 1)
                said, wanted = _people(said), _people(wanted)
            if said != wanted and field != "at":
                return f"signed for {_field(field)} {said!r}, not {wanted!r}: sign it again"
        if abs(now - claim.at) > FRESH_FOR:
            return (
                f"signed at {claim.at:%Y-%m-%d %H:%M:%S} UTC, more than "
                f"{int(FRESH_FOR.total_seconds() // 60)} minutes from the workflow's clock "
                f"({now:%H:%M:%S}): stale, sign it again"
            )
        message = expected.model_copy(update={"at": claim.at}).message()
        try:
            public_key(operator.key).verify(base64.b64decode(signature.value), message)
        except (InvalidSignature, ValueError):
            return f"the signature does not verify with {operator.name}'s key {operator.key[:8]}…"
        return ""


def _field(name: str) -> str:
    return {"workflow_id": "workflow", "run_id": "run", "rung_number": "rung"}.get(name, name)


def fingerprint(key: str) -> str:
    """The OpenSSH fingerprint of a public key blob (base64), e.g. ``SHA256:Yk1…``."""
    digest = hashlib.sha256(base64.b64decode(key)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def public_key(key: str) -> Ed25519PublicKey:
    """The key of an OpenSSH ``ssh-ed25519`` blob: two length-prefixed strings, the type and
    the 32 key bytes (RFC 8709). Parsed here rather than by cryptography's OpenSSH loader,
    which imports as it goes: a workflow's sandbox must not import."""
    blob = base64.b64decode(key, validate=True)
    kind = KEY_TYPE.encode()
    head = len(kind).to_bytes(4, "big") + kind + (32).to_bytes(4, "big")
    if len(blob) != len(head) + 32 or not blob.startswith(head):
        raise ValueError("not an Ed25519 key")
    return Ed25519PublicKey.from_public_bytes(blob[len(head) :])


def sign(private: Ed25519PrivateKey, decision: Decision) -> Signature:
    """What the CLI sends with a decision (``decision.at`` in whole seconds: see message)."""
    decision = decision.model_copy(update={"at": decision.at.replace(microsecond=0)})
    return Signature(
        decision=decision,
        key=fingerprint(public_blob(private)),
        value=base64.b64encode(private.sign(decision.message())).decode(),
    )


def public_blob(private: Ed25519PrivateKey) -> str:
    """The OpenSSH base64 blob of a private key's public half."""
    line = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return line.decode().split()[1]


def load_private_key(data: bytes, source: str) -> Ed25519PrivateKey:
    """An Ed25519 private key from an OpenSSH or PEM (PKCS#8) file's bytes, unencrypted."""
    loader = (
        serialization.load_ssh_private_key
        if b"OPENSSH PRIVATE KEY" in data
        else serialization.load_pem_private_key
    )
    try:
        key = loader(data, password=None)
    except TypeError:
        raise SigningError(f"{source}: the key is encrypted; use an unencrypted key file") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningError(f"{source}: not a private key file ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"{source}: not an Ed25519 key (ssh-keygen -t ed25519)")
    return key


def private_key_bytes(private: Ed25519PrivateKey) -> bytes:
    """A private key as an OpenSSH key file (what ``ssh-keygen -t ed25519`` writes)."""
    return private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )


def parse_keyring(text: str, source: str) -> Keyring:
    """A keyring file: ``ssh-ed25519 BLOB NAME`` per line, ``#`` comments. Every error found,
    each with its line, in one ``SigningError``."""
    operators: list[Operator] = []
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 3 or fields[0] != KEY_TYPE:
            errors.append(f"line {number}: expected '{KEY_TYPE} KEY NAME'")
            continue
        _, key, name = fields
        if not _NAME.match(name):
            errors.append(f"line {number}: name {name!r}: letters, digits and ._@+- only")
            continue
        try:
            public_key(key)
        except (ValueError, UnsupportedAlgorithm):
            errors.append(f"line {number}: not an Ed25519 public key")
            continue
        if any(o.key == key for o in operators):
            errors.append(f"line {number}: the key of {name} is listed twice")
            continue
        operators.append(Operator(name=name, key=key))
    if errors:
        raise SigningError(f"{source}: " + "; ".join(errors))
    return Keyring(operators=operators, required=True)


def _people(rung: int | None) -> int | None:
    return None if rung is None else rung + 1
