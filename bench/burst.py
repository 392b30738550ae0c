"""What the fleet-scale benches share: a burst of findings, every failing node's agent reporting
at once, and how figures are read (percentiles, a process's RSS)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client

from adapters.sim.identity import as_agent
from remedy.core.models import Finding, NodeRef, Severity
from remedy.ladder.remediation import FindingReport
from remedy.runbook import Match, Runbook
from workers.client import report_finding

# Cordon at once, then park in a long tolerance window: what is measured ends at the cordon.
PARK = Runbook(
    name="bench-cordon", match=[Match(reasons=["Bench"])], cordon=True, tolerance=timedelta(hours=6)
)
IN_FLIGHT = 256  # reports on the wire at once (the agents of the failing nodes)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank); NaN when there is nothing to rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def met(ok: bool) -> str:
    return "met" if ok else "not met"


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) of a process, MB."""
    fields = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def finding(node: str) -> Finding:
    return Finding(
        node=node,
        check="bench",
        reason="Bench",
        severity=Severity.CRITICAL,
        observed_at=datetime.now(UTC),
    )


async def report_all(
    client: Client,
    nodes: list[str],
    pool: str,
    queue: str,
    first: Callable[[str, Finding], Awaitable[object]] | None = None,
) -> dict[str, float]:
    """Every node reports at once (at most IN_FLIGHT on the wire); returns when each agent saw
    its finding. ``first``: what the agent does with it before it reports (its own cordon)."""
    gate = asyncio.Semaphore(IN_FLIGHT)
    sent: dict[str, float] = {}

    async def one(node: str) -> None:
        async with gate:
            sent[node] = time.perf_counter()
            seen = finding(node)
            if first is not None:
                await first(node, seen)
            await report_finding(
                client,
                NodeRef(name=node, pool=pool),
                as_agent(FindingReport(finding=seen, runbook=PARK), datetime.now(UTC)),
                node_task_queue=f"{queue}-agents",
                task_queue=queue,
            )

    await asyncio.gather(*(one(n) for n in nodes))
    return sent
