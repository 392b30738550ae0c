"""A check's terms: its name and the reasons its findings give, each with what it means.

A check declares its terms beside its code, once: ``NAME = CheckTerms("pcie", ...)`` and
``DEGRADED = NAME.reason("PcieWidthDegraded", "what it means")``, and its code uses those
names. ``remedy.detection.vocabulary`` gathers every check's terms (what a runbook's ``match`` may
name)
and tests/generated_docs.py writes them into docs/runbooks.md; no one spells them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False)
class CheckTerms:
    check: str
    says: str  # what it looks at
    reasons: dict[str, str] = field(default_factory=dict)  # reason → what it means
    probe: bool = False  # a re-probe sees the fault while it lasts (an Xid is an event: no)
    # Its faults often pass by themselves, in minutes: `remedy runbooks validate` warns about a
    # runbook that disrupts for one at once, with no approval (remedy/runbook/lint.py).
    transient: bool = False

    def reason(self, name: str, says: str) -> str:
        """Declare a reason this check reports, with what it means; answers ``name``."""
        if name in self.reasons:
            raise ValueError(f"check {self.check} declares reason {name} twice")
        self.reasons[name] = says
        return name
