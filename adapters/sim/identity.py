"""The simulated agents' keys: each node's agent signs its reports with a key of its own and
publishes it on its node, as a real agent does (remedy.trust.identity). Derived from the node's
name,
so that every process playing the fleet (the crash tests' stored fleet, a benchmark's
reporters) signs as that node's agent."""

from __future__ import annotations

import hashlib
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from remedy.ladder.intake import by_agent
from remedy.ladder.remediation import FindingReport


def agent_signing_key(node: str) -> Ed25519PrivateKey:
    seed = hashlib.sha256(f"remedy-sim-agent/{node}".encode()).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def as_agent(report: FindingReport, at: datetime) -> FindingReport:
    """``report`` signed by the simulated agent of its finding's node."""
    return by_agent(report, agent_signing_key(report.finding.node), at)
