"""The door's judgement (remedy.ladder.intake.admit), pure: who may report for a node, with what
proof, asking for which runbook — each refusal saying why, and a report taken with the
controller's runbook, never the one it carried."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from remedy.core.models import Finding, NodeRef, Severity
from remedy.ladder.intake import (
    Admission,
    Door,
    ReportToAdmit,
    admit,
    by_agent,
    by_controller,
    by_operator,
    version,
)
from remedy.ladder.remediation import FindingReport
from remedy.runbook import DEFAULT_RUNBOOK, Match, Runbook, RunbookSet
from remedy.trust.identity import FRESH_FOR
from remedy.trust.signing import Keyring, Operator, public_blob

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
NODE, OTHER = "gpu-node-001", "gpu-node-002"
AGENT, OTHER_AGENT, ALICE = (Ed25519PrivateKey.generate() for _ in range(3))
SEAL = b"s" * 32
ECC = Runbook(name="ecc", match=Match(xids=[48]), description="the controller's")
THERMAL = Runbook(name="thermal", match=Match(checks=["thermal"]))
NO_KEYRING = Keyring()  # the demo's: decisions unverified
KEYRING = Keyring(operators=[Operator(name="alice", key=public_blob(ALICE))], required=True)


def door(keyring: Keyring = NO_KEYRING, queue: str | None = None) -> Door:
    return Door(
        runbooks=(RunbookSet([ECC, THERMAL]),),
        seal=SEAL,
        keyring=keyring,
        node_queue=lambda n: queue,
    )


def xid48(node: str = NODE) -> Finding:
    return Finding(
        node=node, check="xid", reason="Xid48", severity=Severity.CRITICAL, xid=48, observed_at=NOW
    )


def asked(runbook: str = "ecc", finding: Finding | None = None) -> FindingReport:
    sent = Runbook(name=runbook, match=Match(xids=[48]), description="the sender's")
    return FindingReport(finding=finding or xid48(), runbook=sent)


def checked(
    report: FindingReport,
    *,
    to: Door | None = None,
    published: Ed25519PrivateKey = AGENT,
    queue: str = "q",
) -> Admission:
    req = ReportToAdmit(
        ladder=f"node-remediation/{NODE}",
        node=NodeRef(name=NODE),
        node_task_queue=queue,
        report=report,
    )
    return admit(to or door(), req, public_blob(published), NOW)


def test_the_nodes_own_agent_is_taken_with_the_controllers_runbook() -> None:
    taken = checked(by_agent(asked(), AGENT, NOW))
    assert taken.report is not None and taken.why == ""
    assert taken.report.runbook == ECC and taken.report.runbook.description == "the controller's"
    assert taken.report.proof is None  # a ladder keeps no proof
    assert taken.sender.startswith(f"{NODE}'s agent (key SHA256:")
    assert taken.runbook_version == version(ECC)


@pytest.mark.parametrize(
    ("report", "published", "refused"),
    [
        (asked(), AGENT, "unsigned"),
        (by_agent(asked(), OTHER_AGENT, NOW), AGENT, f"not {NODE}'s agent key"),
        (by_agent(asked(), AGENT, NOW - FRESH_FOR - timedelta(seconds=1)), AGENT, "stale"),
        (by_agent(asked(), AGENT, NOW + FRESH_FOR + timedelta(minutes=1)), AGENT, "stale"),
        (by_agent(asked(finding=xid48(OTHER)), AGENT, NOW), AGENT, f"about {OTHER} sent to"),
        (by_agent(asked("not-loaded"), AGENT, NOW), AGENT, "which the controller does not have"),
        (by_agent(asked("thermal"), AGENT, NOW), AGENT, "'thermal' does not match Xid 48"),
    ],
    ids=["unsigned", "another key", "old", "ahead", "another node", "unknown", "mismatched"],
)
def test_an_agents_report_is_refused_saying_why(
    report: FindingReport, published: Ed25519PrivateKey, refused: str
) -> None:
    admission = checked(report, published=published)
    assert admission.report is None and refused in admission.why


def test_words_changed_after_signing_do_not_verify() -> None:
    sent = by_agent(asked(), AGENT, NOW)
    edited = sent.finding.model_copy(update={"evidence": "forged"})
    assert "does not verify" in checked(sent.model_copy(update={"finding": edited})).why


def test_the_default_runbook_is_any_unhealthy_findings() -> None:
    taken = checked(by_agent(asked(DEFAULT_RUNBOOK.name), AGENT, NOW))
    assert taken.report is not None and taken.report.runbook == DEFAULT_RUNBOOK


def test_the_queue_the_ladder_sends_to_must_be_where_the_agent_polls() -> None:
    queued = door(queue=f"remedy-node/{NODE}")
    sent = by_agent(asked(), AGENT, NOW)
    assert checked(sent, to=queued, queue=f"remedy-node/{NODE}").report is not None
    assert "not to 'remedy-node/" in checked(sent, to=queued, queue="attacker").why


def test_the_controllers_seal_speaks_for_any_node_with_any_of_its_runbooks() -> None:
    manual = asked("thermal")  # no match needed: the controller chose it
    assert checked(by_controller(manual, SEAL, NOW)).sender == "the controller"
    assert "seal does not verify" in checked(by_controller(manual, b"x" * 32, NOW)).why


def test_a_trigger_by_hand_is_an_operators_signed_where_a_keyring_is_required() -> None:
    ladder = f"node-remediation/{NODE}"
    unverified = checked(by_operator(asked("thermal"), ladder, "bob", None, NOW))
    assert unverified.report is not None and unverified.sender == "bob [unverified]"
    keyed = door(KEYRING)
    signed = checked(by_operator(asked("thermal"), ladder, "bob", ALICE, NOW), to=keyed)
    assert signed.report is not None and signed.sender.startswith("alice [key SHA256:")
    assert "unsigned" in checked(by_operator(asked(), ladder, "bob", None, NOW), to=keyed).why
    elsewhere = by_operator(asked(), "node-remediation/other", "bob", ALICE, NOW)
    assert "does not verify" in checked(elsewhere, to=keyed).why
