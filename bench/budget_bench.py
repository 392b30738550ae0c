"""What the disruption budget costs, at fleet scale: lease acquire/release throughput and the
latency a lease adds to a ladder, through the real dev server and the real workflows.

Three runs over N simulated nodes failing at once (default 1,000), each in its own pool:
  baseline   cordon → diagnose → restore          (no disruptive rung: no lease)
  free       cordon → drain → diagnose → restore  (budget 100 %: a lease never waits on others)
  contended  the same ladder, budget 50 nodes     (leases queue: grants per second)

    .venv/bin/python bench/budget_bench.py [--nodes 1000] [--contended-budget 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client

from adapters.sim import SimFleet
from remedy.budget import BudgetPolicy, peak_concurrency
from remedy.models import Action, Finding, NodeRef, Severity
from remedy.remediation import FindingReport, Outcome, RemediationState
from remedy.runbook import Match, Runbook, Rung
from workers.client import report_finding
from workers.controller import controller_worker, node_agent_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workflows.node_remediation import NodeRemediation

DIAGNOSE = Rung(action=Action.DIAGNOSE)
LADDERS = {
    "baseline": [DIAGNOSE],
    "free": [Rung(action=Action.DRAIN), DIAGNOSE],
    "contended": [Rung(action=Action.DRAIN), DIAGNOSE],
}


@dataclass
class Run:
    name: str
    nodes: int
    budget: str
    wall_s: float
    ladders_s: list[float]
    lease_waits_s: list[float]
    grants_per_s: float | None
    peak_holders: int
    outcomes: set[Outcome]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_run(client: Client, name: str, nodes: int, budget: str) -> Run:
    tag = uuid.uuid4().hex[:6]
    queue, pool = f"bench-{tag}", f"bench-{name}-{tag}"
    # One GPU per node: the probe is not what this measures.
    fleet = SimFleet(nodes=nodes, gpus_per_node=1, pool=pool, name_prefix=f"{name}-{tag}")
    runbook = Runbook(
        name=f"bench-{name}", match=Match(reasons=["Bench"]), cordon=True, ladder=LADDERS[name]
    )
    policy = BudgetPolicy(max_disruption=budget, storm_share=1.0)  # no storm: measure leases
    now = datetime.now(UTC)
    with ThreadPoolExecutor(max_workers=32) as executor:
        async with (
            controller_worker(client, fleet.cluster, executor, queue, policy),
            node_agent_worker(client, fleet.host, executor, f"{queue}-agents"),
        ):
            start = time.perf_counter()
            gate = asyncio.Semaphore(64)

            async def report(node: str):  # type: ignore[no-untyped-def]
                finding = Finding(
                    node=node,
                    check="bench",
                    reason="Bench",
                    severity=Severity.CRITICAL,
                    observed_at=now,
                )
                async with gate:
                    return await report_finding(
                        client,
                        NodeRef(name=node, pool=pool),
                        FindingReport(finding=finding, runbook=runbook),
                        node_task_queue=f"{queue}-agents",
                        task_queue=queue,
                    )

            handles = await asyncio.gather(*(report(n) for n in sorted(fleet.nodes)))
            results = await asyncio.gather(*(h.result() for h in handles))
            wall = time.perf_counter() - start
            states: list[RemediationState] = [await h.query(NodeRemediation.state) for h in handles]
    ladders = [
        (s.attempts[-1].finished_at - s.started_at).total_seconds()
        for s in states
        if s.started_at and s.attempts
    ]
    leased = [s for s in states if s.lease_granted_at and s.lease_requested_at]
    waits = [
        (s.lease_granted_at - s.lease_requested_at).total_seconds()  # type: ignore[operator]
        for s in leased
    ]
    grants = sorted(s.lease_granted_at for s in leased if s.lease_granted_at)
    span = (grants[-1] - grants[0]).total_seconds() if len(grants) > 1 else 0.0
    holders = [
        (s.lease_granted_at, s.lease_released_at)
        for s in leased
        if s.lease_granted_at and s.lease_released_at
    ]
    return Run(
        name=name,
        nodes=nodes,
        budget=budget if name != "baseline" else "-",
        wall_s=wall,
        ladders_s=ladders,
        lease_waits_s=waits,
        grants_per_s=len(grants) / span if span else None,
        peak_holders=peak_concurrency(holders),  # type: ignore[arg-type]
        outcomes={r.outcome for r in results},
    )


def report_lines(runs: list[Run]) -> list[str]:
    head = (
        f"{'run':<10} {'nodes':>5} {'budget':>6} {'wall s':>7} {'ladder p50':>10} "
        f"{'p90':>6} {'p99':>6} {'lease wait p50':>14} {'p99':>6} {'grants/s':>8} "
        f"{'peak':>5}  outcomes"
    )
    lines = [head, "-" * len(head)]
    for r in runs:
        grants = f"{r.grants_per_s:8.1f}" if r.grants_per_s else f"{'-':>8}"
        wait50 = f"{pct(r.lease_waits_s, 0.5) * 1000:11.0f} ms" if r.lease_waits_s else f"{'-':>14}"
        wait99 = f"{pct(r.lease_waits_s, 0.99):6.2f}" if r.lease_waits_s else f"{'-':>6}"
        lines.append(
            f"{r.name:<10} {r.nodes:>5} {r.budget:>6} {r.wall_s:7.1f} "
            f"{pct(r.ladders_s, 0.5):9.2f}s {pct(r.ladders_s, 0.9):6.2f} "
            f"{pct(r.ladders_s, 0.99):6.2f} "
            f"{wait50} {wait99} {grants} {r.peak_holders:>5}  "
            + ",".join(sorted(o.value for o in r.outcomes))
        )
    base, free = runs[0], runs[1]
    added = statistics.median(free.ladders_s) - statistics.median(base.ladders_s)
    lines += [
        "",
        f"latency a lease adds to a ladder (free − baseline, p50): {added:.2f} s; "
        f"lease wait alone p50 {pct(free.lease_waits_s, 0.5) * 1000:.0f} ms",
        f"contended: at most {runs[2].peak_holders} nodes held a lease at once "
        f"(budget {runs[2].budget})",
    ]
    return lines


async def main(nodes: int, contended: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # History in memory: the figures are the workflows' cost, not this disk's fsyncs.
        async with dev_server(_free_port(), _free_port(), None, Path(tmp) / "bench.log") as client:
            runs = []
            for name, budget in (("baseline", "100%"), ("free", "100%"), ("contended", contended)):
                runs.append(await one_run(client, name, nodes, budget))
                print(f"  {name}: {runs[-1].wall_s:.1f} s", flush=True)
    print(
        f"\nDisruption budget at {nodes} nodes failing at once "
        "(dev server + real workflows, one machine):\n"
    )
    print("\n".join(report_lines(runs)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--contended-budget", default="50")
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.contended_budget))
