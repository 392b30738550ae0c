"""The chaos run's table: printed, written to bench/results/chaos.md with the date, the
configuration and the wall time, and kept as a section of bench/results/report.md (between
markers, so that `make chaos` and bench/report.py each rewrite only their own part)."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from chaos.config import MAX_DISRUPTION, Size
from chaos.measure import Row

HEADERS = [
    "experiment",
    "ladders",
    "doubled effects",
    "lost",
    "stuck",
    "orphaned cordons",
    "peak disruption / cap",
    "notes",
]
BEGIN, END = "<!-- chaos: begin (make chaos) -->", "<!-- chaos: end -->"


def rows_of(rows: list[Row]) -> list[list[str]]:
    return [
        [
            f"({r.key}) {r.title}",
            str(r.ladders),
            str(len(r.doubled)),
            str(len(r.lost)),
            str(len(r.stuck)),
            str(len(r.orphaned)),
            f"{r.peak} / {r.cap}",
            "; ".join(_outcomes(r) + r.notes),
        ]
        for r in rows
    ]


def _outcomes(row: Row) -> list[str]:
    said = ", ".join(f"{n} {o}" for o, n in sorted(row.outcomes.items()))
    extra = [f"{row.extra_ladders} ladders from stale reports"] if row.extra_ladders else []
    return [f"{row.faults} faults → {said}" if said else f"{row.faults} faults", *extra]


def markdown(rows: list[Row]) -> list[str]:
    return [
        "| " + " | ".join(HEADERS) + " |",
        "|---" * len(HEADERS) + "|",
        *("| " + " | ".join(cells) + " |" for cells in rows_of(rows)),
    ]


def problems(rows: list[Row]) -> list[str]:
    """Every non-zero, with what it takes to find it again."""
    out = []
    for r in rows:
        out += [
            f"({r.key}) doubled effect {node} {action} key {key}" for node, action, key in r.doubled
        ]
        out += [f"({r.key}) lost ladder {w}" for w in r.lost]
        out += [f"({r.key}) stuck ladder {w}" for w in r.stuck]
        out += [f"({r.key}) orphaned cordon on {n}" for n in r.orphaned]
        if r.extra_ladders:
            out.append(f"({r.key}) {r.extra_ladders} ladders started by stale reports: {_why(r)}")
        out += [f"({r.key}) stale ladder {s}" for s in r.stale]
        if r.peak > r.cap:
            out.append(f"({r.key}) peak disruption {r.peak} over the cap {r.cap}")
    return out


def _why(row: Row) -> str:
    """Which stale reports started the extra ladders (chaos.disturb.stale_reports counts those
    sent after the ladders ended; the rest came during them, as a ladder completed)."""
    after = {w: n for w, n in row.events.items() if w.startswith("ladders from stale reports")}
    during = row.extra_ladders - sum(after.values())
    said = [f"{n} {what.removeprefix('ladders ')}" for what, n in after.items() if n]
    if during:
        said.append(f"{during} from reports sent during a ladder, as it completed")
    return ", ".join(said)


def configuration(size: Size, seed: int, cap: int) -> str:
    return (
        f"{size.name} run, seed {seed}: {size.ladders} faults per experiment, at most "
        f"{size.in_flight} ladders at once, a pool of {size.nodes} nodes with a disruption "
        f"cap of {MAX_DISRUPTION} = {cap}, the shipped runbooks at {size.speedup:g}x time; "
        f"(c) {size.outages} dev-server outages of {size.outage_s[0]:g}-{size.outage_s[1]:g} s, "
        f"(f) {size.api_outages} cluster-API outages of {size.api_down_s:g} s, "
        f"(h) {size.reports} copies of each report at a time"
    )


def chaos_md(rows: list[Row], size: Size, seed: int, wall_s: float) -> str:
    cap = rows[0].cap if rows else 0
    found = problems(rows)
    lines = [
        "# Crash tests: exactly once with real processes killed at random",
        "",
        f"`make chaos` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.platform()}, "
        f"{os.cpu_count()} CPUs; wall time **{wall_s / 60:.1f} min**.",
        "",
        configuration(size, seed, cap) + ".",
        "",
        *markdown(rows),
        "",
        "Per experiment: " + ", ".join(f"({r.key}) {r.wall_s:.0f} s" for r in rows) + ".",
        "",
        "Found: "
        + ("nothing — every count is zero and no peak is over the cap." if not found else ""),
        *(f"- {p}" for p in found),
        "",
        "How it is measured (chaos/measure.py): *doubled effects* are entries of the fleet "
        "file's effect log with the same (node, action, key) more than once; *lost* ladders "
        "are NodeRemediation runs that failed, timed out or were terminated (the harness "
        "terminates none before measuring); *stuck* ones still run past the deadline; an "
        "*orphaned cordon* is remedy's cordon on a node whose ladder is not running and did "
        "not end needs_human or aborted; *peak disruption* is the most ladders holding a "
        "lease at once, from each ladder's lease_granted_at to the moment it sent the "
        "release (its history; lease_released_at is stamped a workflow task later, which a "
        "killed controller delays by 10 s while the budget has already given the lease on). "
        "docs/operations.md says how to run it.",
        "",
    ]
    return "\n".join(lines)


def report_section(rows: list[Row], size: Size, wall_s: float) -> list[str]:
    return [
        BEGIN,
        "## Crash tests: exactly once under chaos",
        "",
        f"`make chaos` ({size.name} run, {wall_s / 60:.1f} min; details and configuration in "
        "[chaos.md](chaos.md)): the controller, the agents and the dev server killed at "
        "random, answers lost, the cluster API down, the disruption budget terminated, "
        "reports repeated.",
        "",
        *markdown(rows),
        END,
    ]


def section_in(text: str) -> list[str]:
    """The chaos section of a report (empty when it has none)."""
    if BEGIN not in text or END not in text:
        return []
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return [BEGIN, *inside.strip("\n").splitlines(), END]


def keep_section(report: Path, section: list[str]) -> None:
    """Put ``section`` in place of the one between the markers, or at the end."""
    text = report.read_text() if report.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + "\n".join(section) + tail
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(section) + "\n"
    report.write_text(text)


def write_results(rows: list[Row], size: Size, seed: int, wall_s: float, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos.md").write_text(chaos_md(rows, size, seed, wall_s))
    keep_section(out / "report.md", report_section(rows, size, wall_s))
