"""The ladder's door: what a report must show before it starts or feeds a node's ladder.

A report is taken only when its proof (remedy.trust.identity) says who sent it and that sender may
speak for the ladder's node — the node's own agent, the controller, or an operator — and only
with the controller's own runbook of the name it asks for: a node's agent may ask only for a
runbook that matches the fault it reports. Whatever else the report carried of the runbook is
dropped. A refusal says why, and never quotes what it refused.

Pure: the controller's runbooks, seal and keyring, the node's published key and the time come
in (activities/intake.py reads them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from remedy.core.models import Frozen, NodeRef, signed
from remedy.ladder.remediation import FindingReport
from remedy.runbook import DEFAULT_RUNBOOK, Runbook, RunbookSet
from remedy.trust.identity import (
    ReportProof,
    Sender,
    agent_proof,
    controller_proof,
    report_claim,
    why_not_agent,
    why_not_sealed,
    why_stale,
)
from remedy.trust.person_hold import NodeHold
from remedy.trust.signing import Decision, Keyring, Signature, Verb, sign


class MatchedRunbook(Frozen):
    """The controller's runbook for a finding (None: an informational one, nothing to do)."""

    runbook: Runbook | None = None


class RemediationStart(BaseModel):
    """Start (or join) a node's remediation on behalf of a workflow (admission, fleet scan)."""

    node: NodeRef
    report: FindingReport
    node_task_queue: str
    task_queue: str


class ReportToAdmit(Frozen):
    """A report a ladder received, for the controller to check."""

    ladder: str  # the ladder's workflow id (what an operator's trigger is signed for)
    node: NodeRef
    node_task_queue: str  # the queue the ladder's node steps go to
    report: FindingReport
    first: bool = False  # the ladder's first: the controller also reads the node's hold


class Admission(Frozen):
    """The controller's answer: the report as the ladder takes it (its runbook the
    controller's, no proof), or why it is refused."""

    report: FindingReport | None = None
    why: str = ""
    sender: str = ""  # who sent it, in words
    runbook_version: str = ""  # the controller's runbook's digest (sha256, 12 hex digits)
    held: NodeHold | None = None  # the node is held for a person (read for a first report)


@dataclass(frozen=True)
class Door:
    """What the controller checks reports with."""

    # Every runbook it knows by name: its own, then the pools' it was given (the first set
    # that has a name answers for it).
    runbooks: tuple[RunbookSet, ...]
    seal: bytes  # the controllers' key for the findings they make themselves
    keyring: Keyring  # operators' keys: a trigger by hand is signed with one where required
    # The queue the node's agent polls (None: any — the simulated fleet's agents share one).
    node_queue: Callable[[str], str | None]


def admit(door: Door, req: ReportToAdmit, published: str | None, now: datetime) -> Admission:
    """Check ``req`` against ``door`` at ``now``; ``published``: the agent key the node
    published (read only for an agent's report)."""
    report = req.report
    if why := _why_not_here(door, req):
        return Admission(why=why)
    proof = report.proof
    if proof is None:
        return Admission(
            why="unsigned: a report must carry its sender's proof (remedy.trust.identity)"
        )
    if why := why_stale(proof, now):
        return Admission(why=why)
    findings, asked = report.findings(), report.runbook.name
    sender, why = _sender(door, req, proof, published, now)
    if why:
        return Admission(why=why)
    known = next((r for r in door.runbooks if r.has(asked) is not None), None)
    try:
        if known is None:
            raise ValueError(f"asks for runbook {asked!r}, which the controller does not have")
        if proof.sender is Sender.AGENT:  # an agent asks only for what matches its fault
            runbook = known.named_for(asked, report.finding)
        else:
            runbook = known.get(asked) if asked != DEFAULT_RUNBOOK.name else DEFAULT_RUNBOOK
    except ValueError as exc:
        return Admission(why=str(exc), sender=sender)
    taken = FindingReport(finding=report.finding, runbook=runbook, also=findings[1:])
    return Admission(report=taken, sender=sender, runbook_version=version(runbook))


def version(runbook: Runbook) -> str:
    """A runbook's digest: which of the controller's versions a ladder climbs."""
    return hashlib.sha256(runbook.model_dump_json().encode()).hexdigest()[:12]


def trigger_decision(ladder: str, claim: bytes, at: datetime) -> Decision:
    """What an operator signs to start a ladder by hand: the ladder's id (no run yet) and the
    digest of the report's claim (remedy.trust.identity.report_claim)."""
    digest = hashlib.sha256(claim).hexdigest()
    return Decision(workflow_id=ladder, run_id="", verb=Verb.TRIGGER, text=digest, at=at)


def _why_not_here(door: Door, req: ReportToAdmit) -> str:
    node = req.node.name
    if other := next((f.node for f in req.report.findings() if f.node != node), None):
        return f"a finding about {other} sent to {node}'s ladder"
    expected = door.node_queue(node)
    if expected is not None and req.node_task_queue != expected:
        return (
            f"the ladder sends {node}'s steps to queue {req.node_task_queue!r}, not to "
            f"{expected!r}, where its agent polls"
        )
    return ""


def _sender(
    door: Door, req: ReportToAdmit, proof: ReportProof, published: str | None, now: datetime
) -> tuple[str, str]:
    """Who sent the report, and why that proof does not hold (empty: it does)."""
    node, report = req.node.name, req.report
    findings, asked = report.findings(), report.runbook.name
    if proof.sender is Sender.AGENT:
        why = why_not_agent(proof, published, node, findings, asked)
        return f"{node}'s agent (key {proof.key})", why
    if proof.sender is Sender.CONTROLLER:
        return "the controller", why_not_sealed(proof, door.seal, node, findings, asked)
    if not door.keyring.required:  # no keyring: an operator's word, as for any decision
        return f"{signed(proof.by, '')} [unverified]", ""
    if not proof.signature:
        return proof.by, "unsigned: a ladder started by hand needs an operator's key (--key)"
    claim = report_claim(Sender.OPERATOR, node, findings, asked, proof.at)
    expected = trigger_decision(req.ladder, claim, proof.at)
    signature = Signature(decision=expected, key=proof.key, value=proof.signature)
    operator = door.keyring.signer(proof.key)
    why = door.keyring.why_not(signature, expected, now)
    name = operator.name if operator is not None else proof.by
    return f"{name} [key {proof.key}]", why


# -- what senders send ------------------------------------------------------------------------
def by_agent(report: FindingReport, key: Ed25519PrivateKey, at: datetime) -> FindingReport:
    """``report`` signed by its node's agent with the key it published (remedy.trust.identity)."""
    node = report.finding.node
    proof = agent_proof(key, node, report.findings(), report.runbook.name, at)
    return report.model_copy(update={"proof": proof})


def by_controller(report: FindingReport, seal: bytes, at: datetime) -> FindingReport:
    """``report`` sealed by the controller: a finding it made itself."""
    node = report.finding.node
    proof = controller_proof(seal, node, report.findings(), report.runbook.name, at)
    return report.model_copy(update={"proof": proof})


def by_operator(
    report: FindingReport, ladder: str, by: str, key: Ed25519PrivateKey | None, at: datetime
) -> FindingReport:
    """``report`` started by hand: signed with the operator's key for ``ladder`` (its workflow
    id), or with none (taken unverified where the controller has no keyring)."""
    at = at.replace(microsecond=0)
    node, asked = report.finding.node, report.runbook.name
    if key is None:
        proof = ReportProof(sender=Sender.OPERATOR, at=at, by=by)
        return report.model_copy(update={"proof": proof})
    claim = report_claim(Sender.OPERATOR, node, report.findings(), asked, at)
    signature = sign(key, trigger_decision(ladder, claim, at))
    proof = ReportProof(
        sender=Sender.OPERATOR, at=at, by=by, key=signature.key, signature=signature.value
    )
    return report.model_copy(update={"proof": proof})
