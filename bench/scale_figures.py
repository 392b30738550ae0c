"""What the detection → cordon bench measured (bench/scale_bench.py runs it): the figures per
failure share and their rounds, the agents' own cordons, the memory at 10,000 nodes; each
against its target, as text for the terminal and as report.md's section."""

from __future__ import annotations

import statistics

from burst import met
from memory_bench import MemoryRun
from memory_bench import summary as memory_summary
from pydantic import BaseModel

from workers.tables import markdown, plain

TARGET_P90_S = 2.0
TARGET_RATIO = 1.1  # remedy's P90 over the baseline's, same burst, same run
TARGET_AGENT_P90_S = 1.0  # the agents' own cordons, 50 % of the fleet failing


class ShareRun(BaseModel):
    """One failure share: each figure is the median over its rounds of that round's figure."""

    nodes: int
    failing: int
    share: float
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float
    starts_per_s: float
    wall_s: float
    floor_p50_s: float  # the baseline: the same burst of the least a workflow can do
    floor_p90_s: float
    # The baseline started by signal-with-start, as agents report (None: not measured then).
    floor_signal_p90_s: float | None = None
    # Each round's P90s: remedy, the baseline, the baseline by signal-with-start (empty in
    # results from before the rounds: one burst of each then).
    rounds: list[tuple[float, float, float]] = []

    @property
    def ratio(self) -> float:
        """remedy's P90 over the baseline's: the median of the rounds' ratios (each round's
        two bursts ran one after the other, on the same machine as it was then)."""
        if self.rounds:
            return statistics.median(a / b for a, b, _ in self.rounds)
        return self.p90_s / self.floor_p90_s if self.floor_p90_s else float("inf")

    @property
    def signal_ratio(self) -> float | None:
        """The same, over the baseline started by signal-with-start (None: not measured)."""
        if self.rounds:
            return statistics.median(a / c for a, _, c in self.rounds)
        return self.p90_s / self.floor_signal_p90_s if self.floor_signal_p90_s else None


class AgentRun(BaseModel):
    """The agents cordon their own nodes before they report; their ladders adopt the cordons."""

    nodes: int
    failing: int
    p50_s: float
    p90_s: float
    max_s: float
    adopted: int  # ladders whose cordon found their agent's (ALREADY_OURS)
    wall_s: float


class ScaleReport(BaseModel):
    shares: list[ShareRun]
    memory: MemoryRun | None
    target_p90_s: float = TARGET_P90_S
    agent: AgentRun | None = None
    target_ratio: float = TARGET_RATIO
    target_agent_p90_s: float = TARGET_AGENT_P90_S


def rounds_line(run: ShareRun) -> str:
    """Each round's P90s, remedy / baseline (the spread the medians were taken over)."""
    return ", ".join(f"{a:.2f}/{b:.2f}" for a, b, _ in run.rounds)


SHARE_HEADERS = [
    "failing",
    "of",
    "p50 s",
    "p90 s",
    "p99 s",
    "max s",
    "started/s",
    "baseline p50 s",
    "baseline p90 s",
    "p90 / baseline",
    f"≤ {TARGET_RATIO:g}",
    "baseline by signal-with-start p90 s",
    "p90 / it",
]


def share_rows(report: ScaleReport) -> list[list[str]]:
    """One row per failure share (SHARE_HEADERS): printed here, Markdown in the report."""
    return [
        [
            f"{r.failing} ({r.share:.0%})",
            str(r.nodes),
            f"{r.p50_s:.2f}",
            f"{r.p90_s:.2f}",
            f"{r.p99_s:.2f}",
            f"{r.max_s:.2f}",
            f"{r.starts_per_s:.0f}",
            f"{r.floor_p50_s:.2f}",
            f"{r.floor_p90_s:.2f}",
            f"{r.ratio:.2f}",
            met(r.ratio <= report.target_ratio),
            "-" if r.floor_signal_p90_s is None else f"{r.floor_signal_p90_s:.2f}",
            "-" if r.signal_ratio is None else f"{r.signal_ratio:.2f}",
        ]
        for r in report.shares
    ]


def agent_line(report: ScaleReport) -> str | None:
    """The agents' own cordons, next to their target (None: not run)."""
    a = report.agent
    if a is None:
        return None
    return (
        f"agents cordon their own nodes, {a.failing} of {a.nodes} failing (breaker limit "
        f"raised): detection → cordon P50 {a.p50_s:.3f} s, P90 {a.p90_s:.3f} s (target ≤ "
        f"{report.target_agent_p90_s:g} s: {met(a.p90_s <= report.target_agent_p90_s)}); "
        f"{a.adopted} of {a.failing} ladders adopted their agent's cordon"
    )


def at_ten_percent(report: ScaleReport) -> ShareRun | None:
    """The run the target speaks of: 10 % of the fleet failing at once."""
    return next((r for r in report.shares if abs(r.share - 0.1) < 1e-9), None)


def table(report: ScaleReport) -> list[str]:
    lines = [
        "Detection → cordon, every failing node reporting at once (dev server, real workflows):",
        "",
        *plain(SHARE_HEADERS, share_rows(report)),
    ]
    at_10 = at_ten_percent(report)
    if at_10:
        verdict = "meets" if at_10.p90_s <= TARGET_P90_S else "misses"
        lines += [
            "",
            f"target: P90 ≤ {TARGET_P90_S:g} s at {at_10.failing} of {at_10.nodes}: "
            f"{at_10.p90_s:.2f} s ({verdict} it); baseline (a one-activity "
            f"workflow, same burst, same server) {at_10.floor_p90_s:.2f} s",
        ]
    if (agents := agent_line(report)) is not None:
        lines += ["", agents]
    if report.memory:
        lines += ["", memory_summary(report.memory)]
    return lines


def rounds_said(scale: ScaleReport) -> str:
    """How the figures were taken: one burst of each, or the medians of several rounds."""
    rounds = max((len(r.rounds) for r in scale.shares), default=0)
    if rounds < 2:
        return ""
    return (
        f" Each figure is the median of {rounds} rounds' (a burst of each kind per round, "
        "remedy first in every other round), after a first burst thrown away; each ratio is "
        "the median of the rounds' ratios, remedy's P90 over the baseline's of the same round. "
        "One burst's P90 swings by a third from one to the next on this machine."
    )


def scale_section(scale: ScaleReport) -> list[str]:
    lines = [
        "## Detection → cordon at scale",
        "",
        "Every failing node's agent reports at once (signal-with-start of its "
        "NodeRemediation); latency is from a node's report to its cordon taking effect. "
        "The baseline is the same burst of a workflow that does nothing but run one "
        "activity, on the same server in the same run: the floor this server and machine "
        f"allow. Target: remedy's P90 within {scale.target_ratio:g}× the baseline's. "
        "The last two columns: the baseline started as agents report, by signal-with-start."
        + rounds_said(scale),
        "",
        *markdown(SHARE_HEADERS, share_rows(scale)),
    ]
    if any(r.rounds for r in scale.shares):
        lines += ["", "Each round's P90, remedy / baseline, in the order run:", ""]
        lines += [f"- {r.failing} of {r.nodes}: {rounds_line(r)}" for r in scale.shares]
    if (agents := agent_line(scale)) is not None:
        lines += ["", "Below the floor: " + agents + "."]
    at_10 = at_ten_percent(scale)
    if at_10:
        lines += [
            "",
            f"Target P90 ≤ {scale.target_p90_s:g} s at {at_10.failing} of {at_10.nodes}: "
            f"**{at_10.p90_s:.2f} s** ({met(at_10.p90_s <= scale.target_p90_s)}); the "
            f"baseline's P90 in the same run: {at_10.floor_p90_s:.2f} s. NVSentinel reports "
            "P50 16.8 s / P90 28.2 s for 150 of 1,500.",
        ]
    if scale.memory:
        said = memory_summary(scale.memory)
        lines += ["", said[0].upper() + said[1:] + "."]
    return lines
