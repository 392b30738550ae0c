"""What the disruption budget costs, at fleet scale: lease grants per second and the latency a
lease adds to a ladder, through the real dev server and the real workflows.

Runs over N simulated nodes failing at once (default 1,000), each in its own pool:
  baseline   cordon → diagnose → restore          (no disruptive rung: no lease)
  unleased   cordon → drain → diagnose → restore  (the same drain, no lease: bench/unleased.py)
  free       cordon → drain → diagnose → restore  (budget 100 %: a lease never waits on others)
  contended  the same ladder, budget 50 nodes     (leases queue behind each other)
  burst      the same ladder, every ladder waiting at once behind a budget of 0 (a freeze),
             then one request raises it to 100 %: the grants of the whole pool at once

Grants per second is the burst's: N grants over the time from the raise to the last grant
delivered into a ladder's history (the grant signal's event there); the budget's
acknowledgment of each delivery (its own history, one write after another on the one
workflow), and how fast the ladders' worker takes them up (its backlog of every ladder's
tasks), are printed beside it. The
free run's rate is bounded by how fast N ladders reach their request on this machine, not by
the budget (printed beside it too). The added latency is the free run's ladder p50 less the
unleased run's, the median of ``PAIRS`` pairs run one after the other (each pair's printed);
free − baseline is the drain rung and its lease. The peak is the cluster's record: nodes
drained and not yet restored at once, in the order the simulated API served the calls.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path

from budget_history import all_waiting, history_of, received_at
from pydantic import BaseModel
from temporalio.client import Client
from unleased import UnleasedRemediation

from adapters.sim import SimFleet
from contract.messages import NODE_UNHEALTHY
from contract.names import budget_workflow_id
from remedy.budget import BudgetPolicy, UnhealthyReport, allowed_disruptions
from remedy.models import Action, Finding, NodeRef, Severity
from remedy.remediation import FindingReport, RemediationState
from remedy.runbook import Match, Runbook, Rung
from workers.client import report_finding
from workers.controller import WORKFLOWS, controller_worker, node_agent_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workflows.node_remediation import NodeRemediation

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_GRANTS_PER_S, TARGET_ADDED_S = 100.0, 2.0
# A diagnose attempt that never finishes is retried after a minute, not the default 10: on a
# machine at load 10, one attempt of 200 started and never finished, holding its run 10 min.
DIAGNOSE = Rung(action=Action.DIAGNOSE, timeout=timedelta(minutes=1))
LEASED = [Rung(action=Action.DRAIN), DIAGNOSE]
LADDERS = {
    "baseline": [DIAGNOSE],
    "unleased": LEASED,
    "free": LEASED,
    "contended": LEASED,
    "burst": LEASED,
}
UNLEASED = ("baseline", "unleased")  # no lease asked
# The unleased and free runs go in pairs, this many: one pair's difference swings by several
# seconds on a 2-core machine (a run whose sticky-queue backlog passes 10 s pays for it), so
# the added latency is the median of the pairs'. The pairs after the first: "unleased-2", ...
PAIRS = 3


def kind(run: str) -> str:
    """The ladder a run measures: "free-2" is the second pair's free run."""
    return run.split("-")[0]


FREE = BudgetPolicy(max_disruption="100%", storm_share=1.0)  # no storm: measure leases


class BudgetRun(BaseModel):
    name: str
    nodes: int
    budget: str
    wall_s: float
    ladders_s: list[float]
    lease_waits_s: list[float]
    grants_per_s: float | None  # over the span of the grants (the burst: from the raise)
    # The burst: grants in the ladders' histories per second from the raise (the budget's
    # record of each delivery), before each ladder's worker has taken its grant up.
    delivered_per_s: float | None = None
    # The burst: grants per second from the raise, by when each grant's signal landed in its
    # ladder's history (the server's delivery, before the ladder's worker takes it up).
    received_per_s: float | None = None
    decided_after_s: float | None = None  # the burst: raise → the budget's first grant sent
    deciding_tasks: int = 0  # the burst: the budget's workflow tasks that sent its grants
    peak_disrupted: int  # the cluster's record: drained and not yet restored at once
    outcomes: list[str]
    budget_tasks: int  # the budget's workflow tasks, all runs
    budget_events: dict[str, int]  # its history's events by type

    def p(self, q: float, values: list[float] | None = None) -> float:
        return pct(self.ladders_s if values is None else values, q)


class BudgetReport(BaseModel):
    nodes: int
    runs: list[BudgetRun]
    target_grants_per_s: float = TARGET_GRANTS_PER_S
    target_added_s: float = TARGET_ADDED_S
    finished_at: datetime | None = None  # when the runs ended (a report from before: unknown)

    def run(self, name: str) -> BudgetRun:
        return next(r for r in self.runs if r.name == name)

    def _p50_less(self, name: str, free: str = "free") -> float:
        return statistics.median(self.run(free).ladders_s) - statistics.median(
            self.run(name).ladders_s
        )

    @property
    def pairs_added_s(self) -> list[float]:
        """Each pair's free − unleased p50, in the order they ran."""
        names = {r.name for r in self.runs}
        pairs = [("unleased", "free")] + [
            (f"unleased-{i}", f"free-{i}") for i in range(2, PAIRS + 1)
        ]
        return [self._p50_less(u, f) for u, f in pairs if u in names and f in names]

    @property
    def added_s(self) -> float:
        """What the lease alone adds: the same ladder without one, the median over the pairs
        (a report from before the unleased run: with its drain rung)."""
        pairs = self.pairs_added_s
        return statistics.median(pairs) if pairs else self._p50_less("baseline")

    @property
    def with_drain_s(self) -> float:
        """The drain rung and its lease together."""
        return self._p50_less("baseline")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def raise_budget(client: Client, pool: str, queue: str, node: str, nodes: int) -> datetime:
    """The burst: one of the pool's nodes reports again, and its report carries a budget of
    100 % (a pool's policy comes with every report and request); the budget grants every
    waiter in the workflow task that takes it."""
    raised = datetime.now(UTC)
    again = UnhealthyReport(
        node=node, pool=pool, task_queue=queue, at=raised, pool_size=nodes, policy=FREE
    )
    await NODE_UNHEALTHY.send(client.get_workflow_handle(budget_workflow_id(pool)), again)
    return raised


async def one_run(client: Client, name: str, nodes: int, budget: str) -> BudgetRun:
    tag = uuid.uuid4().hex[:6]
    queue, pool = f"bench-{tag}", f"bench-{name}-{tag}"
    # One GPU per node: the probe is not what this measures.
    fleet = SimFleet(nodes=nodes, gpus_per_node=1, pool=pool, name_prefix=f"{name}-{tag}")
    runbook = Runbook(
        name=f"bench-{name}",
        match=Match(reasons=["Bench"]),
        cordon=True,
        ladder=LADDERS[kind(name)],
    )
    policy = FREE.model_copy(update={"max_disruption": budget})
    now = datetime.now(UTC)
    raised: datetime | None = None
    with ThreadPoolExecutor(max_workers=32) as executor:
        async with (
            controller_worker(
                client, fleet.cluster, executor, queue, policy, workflows=workflows_for(kind(name))
            ),
            node_agent_worker(client, fleet.host, executor, f"{queue}-agents"),
        ):
            start = time.perf_counter()
            gate = asyncio.Semaphore(64)

            async def report(node: str):  # type: ignore[no-untyped-def]
                async with gate:
                    return await report_finding(
                        client,
                        NodeRef(name=node, pool=pool),
                        FindingReport(finding=finding(node, now), runbook=runbook),
                        node_task_queue=f"{queue}-agents",
                        task_queue=queue,
                    )

            handles = await asyncio.gather(*(report(n) for n in sorted(fleet.nodes)))
            if name == "burst":
                await all_waiting(client, pool, nodes)
                raised = await raise_budget(client, pool, queue, min(fleet.nodes), nodes)
            results = await asyncio.gather(*(h.result() for h in handles))
            wall = time.perf_counter() - start
            states: list[RemediationState] = [await h.query(NodeRemediation.state) for h in handles]
    received = [at for h in handles if raised and (at := await received_at(client, h))]
    events, delivered, sent = await history_of(client, budget_workflow_id(pool))
    after = [at for at in delivered if raised and at >= raised]  # the burst's grants
    deciding = sorted(at for at in sent.values() if raised and at >= raised)
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
    first = raised or (grants[0] if grants else None)
    span = (grants[-1] - first).total_seconds() if grants and first else 0.0
    return BudgetRun(
        name=name,
        nodes=nodes,
        budget=budget if kind(name) not in UNLEASED else "-",
        wall_s=wall,
        ladders_s=ladders,
        lease_waits_s=waits,
        grants_per_s=len(grants) / span if span > 0 else None,
        delivered_per_s=len(after) / (max(after) - raised).total_seconds()
        if after and raised
        else None,
        received_per_s=len(received) / (max(received) - raised).total_seconds()
        if received and raised
        else None,
        decided_after_s=(deciding[0] - raised).total_seconds() if deciding and raised else None,
        deciding_tasks=len(deciding),
        peak_disrupted=fleet.most_out_at_once("drain"),
        outcomes=sorted({r.outcome.value for r in results}),
        budget_tasks=events["WORKFLOW_TASK_COMPLETED"],
        budget_events=dict(events),
    )


def workflows_for(run: str) -> list[type]:
    """The controller's workflows; the unleased run's ladder has no lease (bench/unleased.py)."""
    if run != "unleased":
        return WORKFLOWS
    return [UnleasedRemediation if w is NodeRemediation else w for w in WORKFLOWS]


def finding(node: str, at: datetime) -> Finding:
    return Finding(
        node=node, check="bench", reason="Bench", severity=Severity.CRITICAL, observed_at=at
    )


def met(ok: bool) -> str:
    return "met" if ok else "not met"


def verdicts(report: BudgetReport) -> list[str]:
    burst, free, contended = report.run("burst"), report.run("free"), report.run("contended")
    rate, told = burst.received_per_s or 0.0, burst.grants_per_s or 0.0
    pairs = " / ".join(f"{added:.2f}" for added in report.pairs_added_s)
    lines = [
        f"lease grants per second, {report.nodes} nodes at once, free budget (the burst, "
        f"in the ladders' histories): {rate:.1f} (target ≥ {report.target_grants_per_s:g}: "
        f"{met(rate >= report.target_grants_per_s)}); acknowledged in the budget's history: "
        f"{burst.delivered_per_s or 0:.1f}; taken up by the ladders: {told:.1f}; "
        f"free run, as fast as the ladders ask: {free.grants_per_s or 0:.1f}; contended "
        f"(budget {contended.budget}): {contended.grants_per_s or 0:.1f}",
        f"the burst: the budget sent its first grant {burst.decided_after_s or 0:.2f} s after "
        f"the raise, its grants in {burst.deciding_tasks} workflow task(s)",
        f"latency a lease adds to a ladder (free − unleased, p50, median of "
        f"{len(report.pairs_added_s)} pairs: {pairs}): {report.added_s:.2f} s "
        f"(target ≤ {report.target_added_s:g} s: {met(report.added_s <= report.target_added_s)});"
        f" lease wait alone p50 {free.p(0.5, free.lease_waits_s) * 1000:.0f} ms; the drain rung "
        f"and its lease (free − baseline, p50): {report.with_drain_s:.2f} s",
    ]
    for run in (free, contended, burst):
        events = run.budget_events
        cap = run.nodes if run.name == "burst" else allowed_disruptions(run.budget, run.nodes)
        lines.append(
            f"{run.name}: at most {run.peak_disrupted} nodes disrupted at once (the cluster's "
            f"record), budget {cap}{' (raised to 100 %)' if run.name == 'burst' else ''}: "
            f"never above: {'yes' if run.peak_disrupted <= cap else 'no'}"
            f"; {run.budget_tasks} budget workflow tasks for {len(run.lease_waits_s)} leases"
            f", {events.get('WORKFLOW_TASK_FAILED', 0)} failed; continued as new "
            f"{events.get('WORKFLOW_EXECUTION_CONTINUED_AS_NEW', 0)} time(s)"
        )
    return lines


def report_lines(report: BudgetReport) -> list[str]:
    head = (
        f"{'run':<10} {'nodes':>5} {'budget':>6} {'wall s':>7} {'ladder p50':>10} "
        f"{'p90':>6} {'p99':>6} {'lease wait p50':>14} {'p99':>6} {'grants/s':>8} "
        f"{'peak':>5}  outcomes"
    )
    lines = [head, "-" * len(head)]
    for r in report.runs:
        grants = f"{r.grants_per_s:8.1f}" if r.grants_per_s else f"{'-':>8}"
        waits = r.lease_waits_s
        wait50 = f"{r.p(0.5, waits) * 1000:11.0f} ms" if waits else f"{'-':>14}"
        wait99 = f"{r.p(0.99, waits):6.2f}" if waits else f"{'-':>6}"
        lines.append(
            f"{r.name:<10} {r.nodes:>5} {r.budget:>6} {r.wall_s:7.1f} {r.p(0.5):9.2f}s "
            f"{r.p(0.9):6.2f} {r.p(0.99):6.2f} {wait50} {wait99} {grants} "
            f"{r.peak_disrupted:>5}  " + ",".join(r.outcomes)
        )
    return [*lines, "", *verdicts(report)]


def budget_section(report: BudgetReport) -> list[str]:
    """The figures in Markdown: budget.md, and its section of report.md."""
    return [
        "## The disruption budget: lease grants per second and the latency a lease adds",
        "",
        f"{report.nodes} simulated nodes failing at once per run, each run in its own pool, "
        "the dev server and the real workflows on one machine (bench/budget_bench.py"
        + (f", finished {report.finished_at:%Y-%m-%d %H:%M} UTC" if report.finished_at else "")
        + ").",
        "",
        "```",
        *report_lines(report),
        "```",
    ]


async def main(nodes: int, contended: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # History in memory: the figures are the workflows' cost, not this disk's fsyncs.
        async with dev_server(_free_port(), _free_port(), None, Path(tmp) / "bench.log") as client:
            runs = []
            for name, budget in (
                ("baseline", "100%"),
                ("unleased", "100%"),
                ("free", "100%"),
                *(
                    (f"{run}-{i}", "100%")
                    for i in range(2, PAIRS + 1)
                    for run in ("unleased", "free")
                ),
                ("contended", contended),
                ("burst", "0"),
            ):
                runs.append(await one_run(client, name, nodes, budget))
                print(f"  {name}: {runs[-1].wall_s:.1f} s", flush=True)
    report = BudgetReport(nodes=nodes, runs=runs, finished_at=datetime.now(UTC))
    print(
        f"\nDisruption budget at {nodes} nodes failing at once "
        "(dev server + real workflows, one machine):\n"
    )
    print("\n".join(report_lines(report)))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "budget.json").write_text(report.model_dump_json(indent=2))
    (RESULTS / "budget.md").write_text("\n".join(budget_section(report)) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--contended-budget", default="50")
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.contended_budget))
