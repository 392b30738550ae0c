"""remedy's probe as a node-problem-detector custom plugin: NPD runs a command, reads its exit
code (0 OK, 1 NonOK, 2 Unknown) and the first ``max_output_length`` bytes of its output (80
by default) as the condition's message. The probe's own exit codes are those already; this
is the one line it prints for NPD (examples/npd/remedy-probe.json)."""

from __future__ import annotations

from remedy.core.models import ProbeReport

NPD_OUTPUT_LIMIT = 80  # NPD's default max_output_length


def npd_line(report: ProbeReport, limit: int = NPD_OUTPUT_LIMIT) -> str:
    """The probe's verdict in at most ``limit`` characters: the first finding names the
    fault (the most a condition message can hold), the count says how many more."""
    if report.healthy:
        return f"healthy: {len(report.checks_run)} checks"[:limit]
    if not report.checks_run:
        return "could not probe: no check ran"[:limit]
    first = report.findings[0] if report.findings else None
    if first is None:
        return "unhealthy"
    more = len(report.findings) - 1
    tail = f" (+{more} more)" if more else ""
    head = f"{first.check}/{first.reason} {first.component.describe()}"
    return head[: max(0, limit - len(tail))] + tail
