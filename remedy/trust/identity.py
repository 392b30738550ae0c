"""Who sent a report: only a node's own agent speaks for that node.

A report that starts or feeds a ladder carries a proof (``ReportProof``): a signature over what
it says — the node, each finding, the runbook it asks for, when — by one of three senders:

- **the node's agent**, with an Ed25519 key it made and published on its own Node object
  (``remedy.io/agent-key``). The agent admission policy (deploy/agent-policy.yaml) lets an agent
  write that annotation on the node its pod runs on only, so a key there speaks for that node;
- **the controller**, for the findings it makes itself (a silent agent, a problem condition, an
  orphaned cordon, a node a job blamed), with its seal: an HMAC key only controllers hold;
- **an operator** (``remedy trigger``), with a key of the operator keyring (remedy.trust.signing).

A signature, unlike a bearer token, can sit in a workflow history for anyone to read: a copy
proves only the report it was made for, and a report is fresh for ``FRESH_FOR`` only.

Pure: the keys come in as arguments; reading them (the node's annotation, the seal's file) is
the adapters' work.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field

from remedy.core.models import Finding, Frozen
from remedy.redaction.operator import OperatorName
from remedy.trust.signing import fingerprint, public_blob, public_key

AGENT_KEY_ANNOTATION = "remedy.io/agent-key"  # the node agent's public key, on its own Node
FRESH_FOR = timedelta(minutes=10)  # either way: agents' clocks drift, reports wait in queues
_VERSION = "remedy-report-1"
# The fields of a finding a proof covers (``_VERSION``'s): a newer remedy that adds a field
# signs these still, so an older controller checks what it can read.
_SIGNED = {
    "node",
    "check",
    "reason",
    "severity",
    "xid",
    "evidence",
    "observed_at",
    "pid",
    "process",
    "nvidia_action",
    "gpu_instance",
}
_SIGNED_PART = {"kind", "index", "uuid", "serial", "pci_bus_id", "device", "architecture"}
_INCLUDE: dict[str, object] = {**dict.fromkeys(_SIGNED, True), "component": _SIGNED_PART}


class Sender(StrEnum):
    AGENT = "agent"
    CONTROLLER = "controller"
    OPERATOR = "operator"


class ReportProof(Frozen):
    """A report's signature: who (``sender``; ``key``: the signing key's fingerprint, the
    operator's ``by``), when (``at``), and the signature (base64) over ``report_claim``."""

    sender: Sender
    at: datetime
    # Empty: an operator's trigger where no keyring is configured. Base64 of 64 bytes (an
    # Ed25519 signature) or 32 (the seal): a few more allow for padding.
    signature: str = Field(default="", max_length=100)
    key: str = Field(default="", max_length=100)  # SHA256:<43 characters>
    by: OperatorName = ""


def report_claim(
    sender: Sender, node: str, findings: Sequence[Finding], runbook: str, at: datetime
) -> bytes:
    """The canonical bytes a proof signs: sorted JSON, the time in whole UTC seconds."""
    claim = {
        "v": _VERSION,
        "sender": sender.value,
        "node": node,
        "runbook": runbook,
        "at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "findings": [
            f.model_dump(mode="json", include=_INCLUDE)  # type: ignore[arg-type]
            for f in findings
        ],
    }
    return json.dumps(claim, sort_keys=True, separators=(",", ":")).encode()


def agent_proof(
    private: Ed25519PrivateKey,
    node: str,
    findings: Sequence[Finding],
    runbook: str,
    at: datetime,
) -> ReportProof:
    at = at.replace(microsecond=0)
    claim = report_claim(Sender.AGENT, node, findings, runbook, at)
    return ReportProof(
        sender=Sender.AGENT,
        at=at,
        key=fingerprint(public_blob(private)),
        signature=base64.b64encode(private.sign(claim)).decode(),
    )


def sealed(seal: bytes, node: str, findings: Sequence[Finding], runbook: str, at: datetime) -> str:
    """The controller's seal over a report (HMAC-SHA256, base64)."""
    claim = report_claim(Sender.CONTROLLER, node, findings, runbook, at)
    return base64.b64encode(hmac.new(seal, claim, hashlib.sha256).digest()).decode()


def controller_proof(
    seal: bytes, node: str, findings: Sequence[Finding], runbook: str, at: datetime
) -> ReportProof:
    at = at.replace(microsecond=0)
    return ReportProof(
        sender=Sender.CONTROLLER, at=at, signature=sealed(seal, node, findings, runbook, at)
    )


def why_stale(proof: ReportProof, now: datetime) -> str:
    """Why the proof is too old or too far ahead of ``now`` (empty: fresh)."""
    if abs(now - proof.at) <= FRESH_FOR:
        return ""
    minutes = int(FRESH_FOR.total_seconds() // 60)
    return (
        f"signed at {proof.at:%Y-%m-%d %H:%M:%S} UTC, more than {minutes} minutes from the "
        f"controller's clock ({now:%H:%M:%S}): stale"
    )


def why_not_agent(
    proof: ReportProof,
    published: str | None,
    node: str,
    findings: Sequence[Finding],
    runbook: str,
) -> str:
    """Why ``proof`` is not ``node``'s agent's signature of this report, given the key the
    node published (``published``: its OpenSSH blob; None when the node has none). Empty: it
    is. For example, the agent of gpu-node-001 signing a report for gpu-node-002 is refused
    with "signed by key SHA256:…, not gpu-node-002's agent key SHA256:…"."""
    if published is None:
        return f"{node} has published no agent key ({AGENT_KEY_ANNOTATION}): nothing is checked"
    try:
        key = public_key(published)
    except ValueError:
        return f"{node}'s published agent key is not an Ed25519 key"
    expected = fingerprint(published)
    if proof.key != expected:
        return f"signed by key {proof.key or '(none)'}, not {node}'s agent key {expected}"
    claim = report_claim(Sender.AGENT, node, findings, runbook, proof.at)
    try:
        key.verify(base64.b64decode(proof.signature, validate=True), claim)
    except (InvalidSignature, ValueError):
        return f"the signature does not verify with {node}'s agent key {expected}"
    return ""


def why_not_sealed(
    proof: ReportProof, seal: bytes, node: str, findings: Sequence[Finding], runbook: str
) -> str:
    """Why ``proof`` is not the controller's seal over this report (empty: it is)."""
    expected = sealed(seal, node, findings, runbook, proof.at)
    if not hmac.compare_digest(expected.encode(), proof.signature.encode()):
        return "the controller's seal does not verify (sealed by another controller's key?)"
    return ""
