"""What the node agent reports: a finding once per change, not once per probe round.

A finding is the same fault as long as its ``ReportKey`` (what was seen, on which part) is the
same; it has changed when what routes it does (``Routing``: its severity, NVIDIA's action, the
MIG instance) — not its evidence text or its time, which differ every round. A fault that went
away and comes back is a change; so is one whose routing changed. A repeat the ladder it was
reported to already holds (that ladder still runs) is folded: not sent again, counted. What
several checks see of one fault in one round (Xid 48, and the probe's EccUncorrectable,
RowRemapPending and RecoveryActionGpuReset on that GPU) goes as one report
(``one_per_fault``). The agent's liveness is no report's business: it is the heartbeat on its
node conditions (``remedy.scan.liveness``), so a quiet node needs no keep-alive report.
"""

from __future__ import annotations

from remedy.core.models import Finding, Severity
from remedy.ladder.verification import on_part_of
from remedy.runbook import Runbook

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


def one_per_fault(matched: list[tuple[Finding, Runbook]]) -> list[tuple[Runbook, list[Finding]]]:
    """The round's findings as reports: those that match the same runbook about the same part
    (``on_part_of`` the first) are one fault, sent once with the first as the lead — what a
    ladder would do with the others is record them (a report of its own runbook about its
    part never changes its course). In the order seen; a part's other runbook is its own.

    >>> from datetime import UTC, datetime
    >>> from remedy.core.models import Component, ComponentKind
    >>> ecc = Runbook.model_validate({"name": "ecc", "match": {"reasons": ["x"]}, "ladder": []})
    >>> t = datetime(2026, 12, 1, tzinfo=UTC)
    >>> def on(gpu, reason):
    ...     part = Component(kind=ComponentKind.GPU, index=gpu)
    ...     return Finding(node="n", check="memory", reason=reason, component=part,
    ...                    severity=Severity.CRITICAL, observed_at=t)
    >>> seen = [(on(3, "Xid48"), ecc), (on(3, "EccUncorrectable"), ecc), (on(0, "Xid48"), ecc)]
    >>> [(rb.name, [f.reason for f in fs]) for rb, fs in one_per_fault(seen)]
    [('ecc', ['Xid48', 'EccUncorrectable']), ('ecc', ['Xid48'])]
    """
    reports: list[tuple[Runbook, list[Finding]]] = []
    for finding, runbook in matched:
        fault = next(
            (
                found
                for rb, found in reports
                if rb.name == runbook.name and on_part_of(found[0], finding)
            ),
            None,
        )
        if fault is None:
            reports.append((runbook, [finding]))
        else:
            fault.append(finding)
    return reports
