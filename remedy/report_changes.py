"""What the node agent reports: a finding once per change, not once per probe round.

A finding is the same fault as long as its ``ReportKey`` (what was seen, on which part) is the
same; it has changed when what routes it does (``Routing``: its severity, NVIDIA's action, the
MIG instance) — not its evidence text or its time, which differ every round. A fault that went
away and comes back is a change; so is one whose routing changed. A repeat the ladder it was
reported to already holds (that ladder still runs) is folded: not sent again, counted. The
agent's liveness is no report's business: it is the heartbeat on its node conditions
(``remedy.liveness``), so a quiet node needs no keep-alive report.
"""

from __future__ import annotations

from remedy.models import Finding, Severity

ReportKey = tuple[str, str, int | None, int | None, str | None]
Routing = tuple[Severity, str | None, int | None]


def report_key(finding: Finding) -> ReportKey:
    """The fault: its check, reason and Xid, on which GPU (index) or device."""
    part = finding.component
    return (finding.check, finding.reason, finding.xid, part.index, part.device)


def routing(finding: Finding) -> Routing:
    """What decides which runbook and rung a report leads to; anything else is news to no one."""
    return (finding.severity, finding.nvidia_action, finding.gpu_instance)


class Changes:
    """The findings of each round that are changes, given the last round's.

    >>> from datetime import UTC, datetime, timedelta
    >>> t = datetime(2026, 12, 1, tzinfo=UTC)
    >>> ecc = Finding(node="n", check="memory", reason="EccUncorrectable",
    ...               severity=Severity.CRITICAL, observed_at=t)
    >>> seen = Changes()
    >>> [f.reason for f in seen.round([ecc])]  # new
    ['EccUncorrectable']
    >>> seen.round([ecc.model_copy(update={"observed_at": t + timedelta(seconds=30)})])
    []
    >>> seen.round([]), len(seen.round([ecc]))  # cleared, then back: a change
    ([], 1)
    >>> worse = ecc.model_copy(update={"nvidia_action": "RESET_GPU"})
    >>> len(seen.round([worse]))  # routed differently now: a change
    1
    """

    def __init__(self) -> None:
        self._last: dict[ReportKey, Routing] = {}

    def round(self, findings: list[Finding]) -> list[Finding]:
        """The findings that are new or routed differently since the last round (the first
        of each key); from now on, these are what the node has."""
        current: dict[ReportKey, Finding] = {}
        for finding in findings:
            current.setdefault(report_key(finding), finding)
        changed = [f for k, f in current.items() if self._last.get(k) != routing(f)]
        self._last = {k: routing(f) for k, f in current.items()}
        return changed

    def forget(self, finding: Finding) -> None:
        """Its report did not go out: the next round sees it as a change again."""
        self._last.pop(report_key(finding), None)
