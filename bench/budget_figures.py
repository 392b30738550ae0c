"""The disruption budget bench's figures: what each run measured, the verdicts against the
targets, and their text for the terminal, budget.md and report.md (bench/budget_bench.py runs
them)."""

from __future__ import annotations

import statistics
from datetime import datetime

from burst import met, pct
from pydantic import BaseModel

from remedy.disruption.budget import allowed_disruptions

TARGET_GRANTS_PER_S, TARGET_ADDED_S = 100.0, 2.0
# The unleased and free runs go in pairs, this many: one pair's difference swings by several
# seconds on a 2-core machine (a run whose sticky-queue backlog passes 10 s pays for it), so
# the added latency is the median of the pairs'. The pairs after the first: "unleased-2", ...
PAIRS = 3


def kind(run: str) -> str:
    """The ladder a run measures: "free-2" is the second pair's free run."""
    return run.split("-")[0]


class BudgetRun(BaseModel):
    name: str
    nodes: int
    budget: str
    wall_s: float
    ladders_s: list[float]  # the mixed run: its leased half
    # The mixed run: the ladders without a lease, every other node of the same burst.
    unleased_ladders_s: list[float] = []
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
    def mixed_added_s(self) -> list[float]:
        """Each mixed run's leased half's p50 less its unleased half's: one burst, one load,
        one budget (none in a report from before the mixed runs)."""
        return [
            statistics.median(r.ladders_s) - statistics.median(r.unleased_ladders_s)
            for r in self.runs
            if kind(r.name) == "mixed" and r.unleased_ladders_s
        ]

    @property
    def same_run_added_s(self) -> float | None:
        """The median over the mixed runs (None: none ran)."""
        added = self.mixed_added_s
        return statistics.median(added) if added else None

    @property
    def with_drain_s(self) -> float:
        """The drain rung and its lease together."""
        return self._p50_less("baseline")


def verdicts(report: BudgetReport) -> list[str]:
    burst, free, contended = report.run("burst"), report.run("free"), report.run("contended")
    rate, told = burst.received_per_s or 0.0, burst.grants_per_s or 0.0
    lines = [
        f"lease grants per second, {report.nodes} nodes at once, free budget (the burst, "
        f"in the ladders' histories): {rate:.1f} (target ≥ {report.target_grants_per_s:g}: "
        f"{met(rate >= report.target_grants_per_s)}); acknowledged in the budget's history: "
        f"{burst.delivered_per_s or 0:.1f}; taken up by the ladders: {told:.1f}; "
        f"free run, as fast as the ladders ask: {free.grants_per_s or 0:.1f}; contended "
        f"(budget {contended.budget}): {contended.grants_per_s or 0:.1f}",
        f"the burst: the budget sent its first grant {burst.decided_after_s or 0:.2f} s after "
        f"the raise, its grants in {burst.deciding_tasks} workflow task(s)",
        *added_lines(report),
        f"lease wait alone p50 {free.p(0.5, free.lease_waits_s) * 1000:.0f} ms; the drain rung "
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


def added_lines(report: BudgetReport) -> list[str]:
    """The latency a lease adds, against its target: in one run where it can be had (every
    other ladder leased: the load and the budget's work weigh on both halves alike), and
    across the pairs of runs, with their spread (the budget's own load on the machine
    included, and the machine's drift from one run to the next)."""
    target = report.target_added_s
    pairs = " / ".join(f"{added:.2f}" for added in report.pairs_added_s)
    across = f"free − unleased, p50, median of {len(report.pairs_added_s)} pairs of runs: {pairs}"
    same = report.same_run_added_s
    if same is None:
        return [
            f"latency a lease adds to a ladder ({across}): {report.added_s:.2f} s (target ≤ "
            f"{target:g} s: {met(report.added_s <= target)})"
        ]
    return [
        f"latency a lease adds to a ladder (mixed runs, every other ladder leased, each half "
        f"on a worker of its own: leased − unleased half, p50, median of "
        f"{len(report.mixed_added_s)}: {' / '.join(f'{a:.2f}' for a in report.mixed_added_s)}"
        f"): {same:.2f} s (target ≤ {target:g} s: {met(same <= target)})",
        f"  across runs ({across}): {report.added_s:.2f} s",
    ]


def report_lines(report: BudgetReport) -> list[str]:
    head = (
        f"{'run':<10} {'nodes':>5} {'budget':>6} {'wall s':>7} {'ladder p50':>10} "
        f"{'p90':>6} {'p99':>6} {'lease wait p50':>14} {'p99':>6} {'grants/s':>8} "
        f"{'peak':>5}  outcomes"
    )
    lines = [head, "-" * len(head)]
    for r in report.runs:
        half = r.unleased_ladders_s
        grants = f"{r.grants_per_s:8.1f}" if r.grants_per_s else f"{'-':>8}"
        waits = r.lease_waits_s
        wait50 = f"{r.p(0.5, waits) * 1000:11.0f} ms" if waits else f"{'-':>14}"
        wait99 = f"{r.p(0.99, waits):6.2f}" if waits else f"{'-':>6}"
        # The mixed run's row is its leased half (its peak and wall time are both halves').
        lines.append(
            f"{r.name:<10} {len(r.ladders_s) if half else r.nodes:>5} {r.budget:>6} "
            f"{r.wall_s:7.1f} {r.p(0.5):9.2f}s "
            f"{r.p(0.9):6.2f} {r.p(0.99):6.2f} {wait50} {wait99} {grants} "
            f"{r.peak_disrupted:>5}  " + ",".join(r.outcomes)
        )
        if half:  # the mixed run: the row above is its leased half
            lines.append(
                f"{'  no lease':<10} {len(half):>5} {'-':>6} {'':>7} {r.p(0.5, half):9.2f}s "
                f"{r.p(0.9, half):6.2f} {r.p(0.99, half):6.2f}"
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
