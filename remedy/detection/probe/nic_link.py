"""The probe's NIC link check: each RDMA port's error counters as counts over the last hour
(remedy/detection/probe/nic_counters.py has the thresholds and their sources), with its terms.

A link that went down and came back is a flap: tolerated and watched (``nic-link-flapping``);
three in the hour, or a counter that means the link broke its lossless contract, escalate
(``nic-link-failing``). A counter that cannot be read is the NIC check's finding (fail closed:
``NicCountersUnreadable``), never a quiet port.
"""

from __future__ import annotations

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe import nic_counters as nc
from remedy.detection.probe.context import CheckContext
from remedy.detection.probe.nic_check import NIC, UNREADABLE
from remedy.detection.probe.nics import PortCounters

NIC_LINK = CheckTerms(
    "nic_link",
    "RDMA port error counters and link flaps, counted over the last hour",
    probe=True,
    transient=True,  # a burst of errors or one flap often passes: watched, not acted on at once
)
LINK_FLAP = NIC_LINK.reason("NicLinkFlap", "an RDMA link went down and came back in the hour")
LINK_FLAPPING = NIC_LINK.reason(
    "NicLinkFlapping", f"an RDMA link went down {nc.FLAPS_TO_ESCALATE} or more times in the hour"
)
SYMBOL_ERRORS = NIC_LINK.reason(
    "NicSymbolErrors", "symbol errors above the IBTA rate (120 an hour): a failing cable or optic"
)
LINK_ERRORS = NIC_LINK.reason(
    "NicLinkErrors", "link retrains or receive errors above their rate: the link degrades"
)
LINK_INTEGRITY = NIC_LINK.reason(
    "NicLinkIntegrity", "link integrity errors or buffer overruns: packets were lost"
)
EFA_ERRORS = NIC_LINK.reason("NicEfaErrors", "EFA retransmits timing out above their rate")

# threshold → (reason, severity) for every counter but link_downed (the flap rule).
_RULES: tuple[tuple[nc.Threshold, str, Severity], ...] = (
    (nc.SYMBOL_ERRORS, SYMBOL_ERRORS, Severity.WARNING),
    (nc.LINK_RETRAINS, LINK_ERRORS, Severity.WARNING),
    (nc.RCV_ERRORS, LINK_ERRORS, Severity.WARNING),
    (nc.INTEGRITY, LINK_INTEGRITY, Severity.CRITICAL),
    (nc.OVERRUN, LINK_INTEGRITY, Severity.CRITICAL),
    (nc.EFA_RETRANS_TIMEOUTS, EFA_ERRORS, Severity.WARNING),
)


def check_nic_link(ctx: CheckContext) -> list[Finding]:
    """Read every port's counters, keep them, and report what rose past its threshold."""
    assert ctx.nics is not None
    history = ctx.nic_history or nc.CounterHistory()  # one-shot probe: no rates yet
    now = ctx.now()
    out: list[Finding] = []
    for reading in ctx.nics.counters():
        nic = Component(kind=ComponentKind.NIC, device=reading.name)
        out.extend(_unreadable(ctx, reading, nic))
        history.observe(reading, now)
        out.extend(_flaps(ctx, history, reading, nic))
        past: dict[str, tuple[Severity, list[str]]] = {}  # one finding per reason and port
        for threshold, reason, severity in _RULES:
            if threshold.counter not in reading.values:
                continue
            rose = history.increase(reading.name, threshold.counter, threshold.per, now)
            if rose is not None and rose > threshold.limit:
                line = f"{threshold.counter} rose by {rose:g}: {threshold.says}"
                past.setdefault(reason, (severity, []))[1].append(line)
        for reason, (severity, lines) in past.items():
            out.append(ctx.finding(NIC_LINK.check, reason, severity, "; ".join(lines), nic))
    return out


def _unreadable(ctx: CheckContext, reading: PortCounters, nic: Component) -> list[Finding]:
    why = dict(reading.unreadable)
    for counter, value in reading.values.items():
        if nc.saturated(counter, value):
            why[counter] = f"at its maximum {value}: it counts no more until cleared"
    if not why:
        return []
    said = "; ".join(f"{c}: {w}" for c, w in sorted(why.items()))
    return [ctx.finding(NIC.check, UNREADABLE, Severity.CRITICAL, said, nic)]


def _flaps(
    ctx: CheckContext, history: nc.CounterHistory, reading: PortCounters, nic: Component
) -> list[Finding]:
    if nc.LINK_DOWNED.counter not in reading.values:
        return []
    downs = history.downs(reading.name, ctx.now())
    if not downs:
        return []
    escalated = downs >= nc.FLAPS_TO_ESCALATE
    reason = LINK_FLAPPING if escalated else LINK_FLAP
    severity = Severity.CRITICAL if escalated else Severity.WARNING
    evidence = f"link_downed rose {downs} times in the last hour"
    return [ctx.finding(NIC_LINK.check, reason, severity, evidence, nic)]


def thresholds_markdown() -> str:
    """The counter thresholds with their reasons, as docs/runbooks.md shows them
    (tests/generated_docs.py writes it there)."""
    rows = ["| counter | a finding when | reason | source |", "|---|---|---|---|"]
    flaps = f"`{LINK_FLAP}`; {nc.FLAPS_TO_ESCALATE}+: `{LINK_FLAPPING}`"
    for t, reason in ((nc.LINK_DOWNED, flaps), *((t, f"`{r}`") for t, r, _ in _RULES)):
        rows.append(f"| `{t.counter}` | {t.says} | {reason} | {t.source} |")
    rows.append(
        f"| any counter | unreadable, missing or at its maximum | `{UNREADABLE}` | fail closed |"
    )
    return "\n".join(rows)
