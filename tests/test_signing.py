"""remedy.trust.signing without Temporal: what an operator signs, the keyring, and every reason a
signature does not make a decision an operator's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key
from typer.testing import CliRunner

from remedy.trust.signing import (
    Decision,
    Keyring,
    SigningError,
    Verb,
    fingerprint,
    load_private_key,
    parse_keyring,
    private_key_bytes,
    public_blob,
    sign,
)
from workers.cli import app

NOW = datetime(2026, 12, 1, 12, 0, 30, 123456, tzinfo=UTC)
ALICE, BOB = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
KEYRING = parse_keyring(f"# ops\n\nssh-ed25519 {public_blob(ALICE)} alice\n", "keyring")
APPROVAL = Decision(
    workflow_id="remediation/n1", run_id="r1", verb=Verb.APPROVE, rung=2, epoch=0, at=NOW
)


def test_a_signed_decision_verifies_and_names_the_keyrings_operator() -> None:
    signature = sign(ALICE, APPROVAL)
    assert signature.decision.at == NOW.replace(microsecond=0)  # whole seconds are signed
    assert KEYRING.why_not(signature, APPROVAL, NOW + timedelta(minutes=4)) == ""
    operator = KEYRING.signer(signature.key)
    assert operator is not None and operator.name == "alice"
    assert operator.fingerprint == signature.key and signature.key.startswith("SHA256:")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"workflow_id": "remediation/n2"}, "signed for workflow 'remediation/n1', not"),
        ({"run_id": "r2"}, "signed for run 'r1', not 'r2'"),
        ({"verb": Verb.ABORT}, "signed for verb"),
        ({"rung": 3}, "signed for rung 3, not 4"),
        ({"epoch": 1}, "signed for epoch 0, not 1"),
        ({"text": "other words"}, "signed for text '', not 'other words'"),
    ],
)
def test_a_signature_for_another_decision_is_refused_saying_which_part_differs(
    change: dict[str, object], reason: str
) -> None:
    expected = APPROVAL.model_copy(update=change)
    assert KEYRING.why_not(sign(ALICE, APPROVAL), expected, NOW).startswith(reason)


def test_an_aborts_no_hold_is_signed_and_an_abort_that_holds_signs_as_before() -> None:
    """`abort --no-hold` lets the next report act on the node: a signature for an abort that
    holds cannot be sent with --no-hold, nor the other way round (remedy.trust.person_hold)."""
    holds = Decision(workflow_id="remediation/n1", run_id="r1", verb=Verb.ABORT, text="v", at=NOW)
    loose = holds.model_copy(update={"no_hold": True})
    assert b"no_hold" not in holds.message()  # the bytes signed before: those still verify
    assert KEYRING.why_not(sign(ALICE, holds), loose, NOW).startswith(
        "signed for no_hold False, not True"
    )
    assert KEYRING.why_not(sign(ALICE, loose), holds, NOW).startswith("signed for no_hold True")
    assert KEYRING.why_not(sign(ALICE, loose), loose, NOW) == ""


def test_unsigned_unknown_stale_and_forged_signatures_are_refused() -> None:
    good = sign(ALICE, APPROVAL)
    assert KEYRING.why_not(None, APPROVAL, NOW).startswith("unsigned")
    assert "not in the keyring" in KEYRING.why_not(sign(BOB, APPROVAL), APPROVAL, NOW)
    assert "stale" in KEYRING.why_not(good, APPROVAL, NOW + timedelta(minutes=6))
    assert "stale" in KEYRING.why_not(good, APPROVAL, NOW - timedelta(minutes=6))  # from ahead
    # BOB's signature presented under ALICE's fingerprint.
    forged = sign(BOB, APPROVAL).model_copy(update={"key": good.key})
    assert KEYRING.why_not(forged, APPROVAL, NOW).startswith("the signature does not verify")
    assert Keyring(required=True).why_not(good, APPROVAL, NOW).endswith("not in the keyring")


def test_the_fingerprint_is_openssh_s() -> None:
    # ssh-keygen -lf of this public key prints this fingerprint.
    blob = "AAAAC3NzaC1lZDI1NTE5AAAAIELe9j4gDH/aYKnmZIOQk/mPXl0jAPB5D46x6j1s3URT"
    assert fingerprint(blob) == "SHA256:F93/wP/BMaWDu/QqPQVHAnZZ/G5A8s4Gf5OYZq5jzIs"


def test_a_keyring_names_every_bad_line() -> None:
    rsa = generate_private_key(public_exponent=65537, key_size=2048).public_key()
    rsa_line = rsa.public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    text = "\n".join(
        [
            f"ssh-ed25519 {public_blob(ALICE)} alice",
            f"ssh-ed25519 {public_blob(ALICE)} alice-again",
            f"{rsa_line} carol",
            f"ssh-ed25519 {public_blob(BOB)} bob;rm",
            "ssh-ed25519 AAAAnotakey dave",
            f"ssh-ed25519 {public_blob(BOB)}",
        ]
    )
    with pytest.raises(SigningError) as err:
        parse_keyring(text, "ops.keys")
    assert str(err.value) == (
        "ops.keys: line 2: the key of alice-again is listed twice; "
        "line 3: expected 'ssh-ed25519 KEY NAME'; "
        "line 4: name 'bob;rm': letters, digits and ._@+- only; "
        "line 5: not an Ed25519 public key; "
        "line 6: expected 'ssh-ed25519 KEY NAME'"
    )
    assert parse_keyring("# nobody yet\n", "empty") == Keyring(required=True)  # refuses all


def test_private_keys_load_from_openssh_and_pem_files_and_nothing_else() -> None:
    pem = ALICE.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    for data in (private_key_bytes(ALICE), pem):
        assert public_blob(load_private_key(data, "k")) == public_blob(ALICE)
    locked = ALICE.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass"),
    )
    with pytest.raises(SigningError, match="k: the key is encrypted"):
        load_private_key(locked, "k")
    with pytest.raises(SigningError, match="k: not a private key file"):
        load_private_key(b"hello", "k")
    rsa = generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(SigningError, match="k: not an Ed25519 key"):
        load_private_key(rsa, "k")


def test_keys_generate_writes_a_private_key_and_its_keyring_line(tmp_path: Path) -> None:
    out = tmp_path / "alice"
    made = CliRunner().invoke(app, ["keys", "generate", str(out), "--name", "alice"])
    assert made.exit_code == 0, made.output
    line = (tmp_path / "alice.pub").read_text().strip()
    keyring = parse_keyring(line, "alice.pub")
    key = load_private_key(out.read_bytes(), str(out))
    assert keyring.operators[0].name == "alice"
    assert keyring.signer(sign(key, APPROVAL).key) is not None
    assert out.stat().st_mode & 0o777 == 0o600 and line in made.output
    again = CliRunner().invoke(app, ["keys", "generate", str(out), "--name", "alice"])
    assert again.exit_code == 1 and "exists: not overwritten" in again.output


def test_an_approval_is_signed_for_its_rung_number_and_the_old_form_still_verifies() -> None:
    """The new form signs the rung as people count it (``rung_number``, from 1) under a
    version of its own; the release before's bytes (``rung``, an index from 0) are unchanged,
    so a decision its CLI signed still verifies, and neither stands for the other."""
    numbered = APPROVAL.model_copy(update={"rung": None, "rung_number": 3})
    message = numbered.message().decode()
    assert '"rung_number":3' in message and '"rung":' not in message
    assert '"v":"remedy-decision-2"' in message
    old = APPROVAL.message().decode()
    assert '"rung":2' in old and "rung_number" not in old and '"v":"remedy-decision-1"' in old
    signed = sign(ALICE, numbered)
    assert KEYRING.why_not(signed, numbered, NOW) == ""
    assert KEYRING.why_not(sign(ALICE, APPROVAL), APPROVAL, NOW) == ""
    other = numbered.model_copy(update={"rung_number": 4})
    assert KEYRING.why_not(signed, other, NOW) == "signed for rung 3, not 4: sign it again"
    assert KEYRING.why_not(signed, APPROVAL, NOW).startswith("signed for rung None, not 3")
