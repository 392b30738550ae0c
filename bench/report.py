"""Write bench/results/report.md and bench/results/fleet.png from the figures the benchmarks
left in bench/results (twin.json from fleet_twin.py, slow_nodes.json from slow_node_bench.py,
scale.json from scale_bench.py, kube_scale.json from kube_scale_bench.py, budget.json from
budget_bench.py, scale_out.md from scale_out_bench.py): each target next to what was measured
and next to the baselines of the same run.

    .venv/bin/python bench/report.py
"""

from __future__ import annotations

import platform
from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no screen: write the file
import matplotlib.pyplot as plt  # noqa: E402
from budget_figures import BudgetReport, budget_section  # noqa: E402
from burst import met  # noqa: E402
from fleet_twin import POLICY_HEADERS, TwinReport, gpu_hours_section, policy_rows  # noqa: E402
from kube_scale_bench import KubeScaleReport, markdown_section  # noqa: E402
from scale_figures import ScaleReport, scale_section  # noqa: E402
from slow_node_bench import SlowNodeReport, slow_node_section  # noqa: E402

from chaos.table import keep_section, section_in  # noqa: E402
from remedy.core.durations import format_duration  # noqa: E402
from twin.job import LadderRun  # noqa: E402
from workers.tables import markdown  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
GOODPUT_TARGET, AVAILABILITY_TARGET = 0.95, 0.9995
ORACLE_GAP_TARGET, JOB_SUCCESS_TARGET, MANUAL_JOB_SUCCESS = 0.005, 0.995, 0.98


def hours(delta: timedelta) -> str:
    return f"{delta / timedelta(hours=1):.1f}"


def twin_section(twin: TwinReport) -> list[str]:
    job = twin.job
    lines = [
        "## Fleet twin: goodput and availability per policy, beside the oracle",
        "",
        f"{job.nodes} nodes in one lockstep job + {job.spares} spares (all paid for), "
        f"{job.days:g} days, seed {twin.seed}; checkpoint every "
        f"{job.checkpoint_interval / timedelta(minutes=1):g} min costing "
        f"{job.checkpoint_cost.total_seconds():g} s, restart "
        f"{job.restart / timedelta(minutes=1):g} min. Faults: the Llama 3 causes at their "
        "reported rates plus transient slowdowns (counts below). Each kind of fault was climbed "
        "for real by NodeRemediation on the time-skipping server under each policy's runbooks; "
        "the weeks pass on the twin's virtual clock (bench/fleet_twin.py, twin/ladders.py).",
        "",
        *markdown(POLICY_HEADERS, policy_rows(twin)),
    ]
    ours = twin.policies[0].result
    lines += [
        "",
        "Targets (remedy's shipped runbooks, next to the two baselines above):",
        "",
        f"- goodput ≥ {GOODPUT_TARGET:.0%}: **{ours.goodput:.2%}** "
        f"({met(ours.goodput >= GOODPUT_TARGET)})",
        f"- node availability ≥ {AVAILABILITY_TARGET:.2%}: **{ours.availability:.3%}** "
        f"({met(ours.availability >= AVAILABILITY_TARGET)})",
        f"- zero needless replacements: **{(n := ours.needless_replacements)}** ({met(n == 0)})",
        "- zero false recoveries (a ladder declared the node recovered or cleared with its "
        f"fault still there; each comes back and stops the job again): "
        f"**{ours.false_recoveries}** ({met(ours.false_recoveries == 0)})",
        *_oracle_lines(twin),
        "",
        "Where the goodput goes (remedy): the job itself pays "
        f"{hours(ours.checkpoint_overhead)} h writing checkpoints and "
        f"{hours(ours.lost_work)} h of work lost since the last checkpoint at each "
        f"interruption; it is down {hours(ours.job_down)} h for restarts, taking bad "
        f"nodes out and waiting for spares ({hours(ours.waiting_for_spares)} h); the "
        f"{job.spares} spares are paid while idle. Remediation decides the detection "
        "delay, the repair time and the needless replacements; the checkpoint interval, "
        "its cost and the restart time belong to the job.",
        "",
        "What each policy's ladder did with each kind of fault:",
        "",
    ]
    rows = [
        [kind, *(_ladder_cell(run.ladders[kind]) for run in twin.policies)]
        for kind in twin.policies[0].ladders
    ]
    lines += markdown(["fault", *(run.result.policy for run in twin.policies)], rows)
    lines += [
        "",
        "Fault events generated (expected from the reference rates for this fleet and period):",
        "",
        *markdown(
            ["cause", "expected", "generated"],
            [[c.cause, f"{c.expected:.1f}", str(c.generated)] for c in twin.causes],
        ),
    ]
    costs = twin.costs
    lines += [
        "",
        "Assumed action durations (the simulated fleet does them in no time): "
        f"drain {costs.drain}, reset {costs.reset_gpu}, reboot {costs.reboot}, "
        f"diagnose {costs.diagnose}, replace {costs.replace} (a machine racked or "
        "provisioned, and admitted).",
    ]
    for run in twin.policies:
        lines.append(f"- *{run.result.policy}*: {run.description}")
    lines += [
        "",
        "Limits of the model: each cause is played by the closest simulated fault "
        "(twin/causes.py says which and why); a fault a ladder left behind comes back after "
        "a random time at its fault's `comes_back` mean (adapters/sim/faults.py) and is then "
        "treated as a known bad node, fixed for real by a person: each false recovery costs "
        "one more interruption, not a chain of them; action durations are the assumptions "
        "above, not measurements; a node only cordoned keeps running the job until it ends; "
        "the oracle sees the same fault events, but which nodes are in the job differs with "
        "each policy's swaps, a difference of a few interruptions either way.",
    ]
    lines += _options_lines(twin) + _checkpoint_lines(twin) + _population_lines(twin)
    return lines + (gpu_hours_section(twin.gpu_hours) if twin.gpu_hours else [])


def _oracle_lines(twin: TwinReport) -> list[str]:
    names = [run.result.policy for run in twin.policies]
    if "oracle" not in names:
        return []
    oracle, ours = twin.result("oracle"), twin.policies[0].result
    gap = oracle.goodput - ours.goodput
    share = gap / (1 - ours.goodput) if ours.goodput < 1 else 0.0
    lines = [
        f"- remedy within {ORACLE_GAP_TARGET * 100:.1f} points of the oracle's goodput: "
        f"**{gap * 100:.2f} points** ({met(gap <= ORACLE_GAP_TARGET)}); remediation "
        f"itself causes **{share:.1%}** of remedy's lost goodput "
        f"({(1 - ours.goodput) * 100:.2f} points lost in all), the rest is the faults "
        "themselves: checkpoints, work since the last one, restarts, idle spares.",
    ]
    for name in names[1:]:
        if name != "oracle":
            other = twin.result(name)
            lines.append(
                f"  - {name}: {(oracle.goodput - other.goodput) * 100:.2f} points below the oracle"
            )
    return lines


def _options_lines(twin: TwinReport) -> list[str]:
    if not twin.options:
        return []
    options = list(twin.options[0].goodput)
    rows = [
        [
            o.policy,
            str(o.spares),
            *(f"{o.goodput[name]:.2%}" for name in options[:1]),
            *(
                f"{o.goodput[name]:.2%} ({(o.goodput[name] - o.goodput[options[0]]) * 100:+.2f})"
                for name in options[1:]
            ),
        ]
        for o in twin.options
    ]
    return [
        "",
        "### Job options: elastic restarts and checkpoint-coordinated drains",
        "",
        "Goodput per policy with the job's options (gain in points over the job as is). "
        "*Elastic*: with no spare, the job carries on with fewer nodes (down to 90 %, "
        "torchrun `--nnodes=MIN:MAX`) instead of waiting, and grows back with a restart at "
        "a checkpoint when a node returns. *Coordinated drains*: a drain of a node whose "
        "fault has not stopped the job waits for the job's next checkpoint and loses no work.",
        "",
        *markdown(["policy", "spares", *options], rows),
        "",
        "Elastic restarts gain only when the job would wait for a node: with the spares "
        "above the job never waits, with none they recover most of the wait. Coordinated "
        "drains gain nothing here: every Llama 3 cause stops the job by itself, and the "
        "transients are gone before any policy drains; they matter for faults a job can run "
        "through (a degraded link, a throttling GPU) under a ladder that drains them.",
    ]


def _checkpoint_lines(twin: TwinReport) -> list[str]:
    c = twin.checkpoint
    if not c:
        return []
    minutes = timedelta(minutes=1)
    return [
        "",
        "### Checkpoint interval (Young/Daly)",
        "",
        f"Measured MTBF of the job under remedy: {c.mtbf / timedelta(hours=1):.2f} h. The job "
        f"checkpoints every **{c.interval / minutes:.1f} min**; √(2·C·MTBF) with C = "
        f"{twin.job.checkpoint_cost.total_seconds():g} s gives **{c.optimal / minutes:.1f} "
        f"min**. First-order lost time {c.lost_at_interval:.2%} at the job's interval, "
        f"{c.lost_at_optimal:.2%} at the optimum; the twin's goodput under remedy "
        f"{c.goodput_at_interval:.2%} → {c.goodput_at_optimal:.2%}. The interval is near its "
        "optimum: checkpoints and rework cost what they must for 419 interruptions in 54 "
        "days; a cheaper checkpoint (C) is the lever, not the interval.",
    ]


def _population_lines(twin: TwinReport) -> list[str]:
    pop = twin.population
    if not pop or not twin.job_success:
        return []
    causes = sorted({cause for r in twin.job_success for cause in r.failures})
    rows = [
        [
            r.policy,
            f"{r.success:.2%}",
            str(r.jobs - r.finished),
            *(str(r.failures.get(cause, 0)) for cause in causes),
            str(r.interruptions),
        ]
        for r in twin.job_success
    ]
    by = {r.policy: r for r in twin.job_success}
    ours, manual = by.get("remedy"), by.get("manual operations")
    lines = [
        "",
        "### Job success over a population of jobs",
        "",
        f"{pop.jobs:,} jobs on the same fleet and fault rates, seed {pop.seed}: sizes from 1 "
        f"to {max(s.nodes for s in pop.sizes)} nodes (three in four use one node), lengths "
        f"log-uniform from {format_duration(pop.shortest)} to {format_duration(pop.longest)}. "
        f"A job fails when a bad node stays in service {format_duration(pop.crash_loop)} or "
        "longer (its restarts land there and crash-loop past "
        "Kubernetes' backoff limit) or after more than "
        f"{pop.max_restarts} interruptions (remedy's job guard's cap); twin/population.py.",
        "",
        *markdown(["policy", "job success", "failed", *causes, "interruptions"], rows),
    ]
    if ours and manual:
        lines += [
            "",
            f"- job success ≥ {JOB_SUCCESS_TARGET:.1%} with remedy: **{ours.success:.2%}** "
            f"({met(ours.success >= JOB_SUCCESS_TARGET)})",
            f"- manual operations near {MANUAL_JOB_SUCCESS:.0%}: **{manual.success:.2%}**. "
            "This one is a calibration, not a result: the population's mix of sizes and "
            "lengths was chosen so that manual operations land there; every other policy "
            "runs the same jobs. remedy's failures are the restart cap on the largest, "
            "longest jobs, which the oracle meets too.",
        ]
    return lines


def _ladder_cell(ladder: LadderRun) -> str:
    climbed = [s.action.value for s in ladder.steps if s.rung >= 0]
    left = " — fault still there" if ladder.false_recovery else ""
    return ladder.outcome + (f" ({', '.join(climbed)})" if climbed else "") + left


def plot(twin: TwinReport | None, scale: ScaleReport | None, path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    if twin:
        names = [run.result.policy for run in twin.policies]
        x = range(len(names))
        goodput = [run.result.goodput * 100 for run in twin.policies]
        unavailable = [(1 - run.result.availability) * 100 for run in twin.policies]
        left.bar([i - 0.2 for i in x], goodput, width=0.4, label="goodput %")
        left.axhline(
            GOODPUT_TARGET * 100, color="grey", linestyle="--", linewidth=1, label="goodput target"
        )
        left.set_ylim(min(goodput) - 10, 100)
        left.set_xticks(list(x), names)
        left.set_ylabel("goodput, % of paid GPU time")
        twin_axis = left.twinx()
        twin_axis.bar(
            [i + 0.2 for i in x],
            unavailable,
            width=0.4,
            color="tab:orange",
            label="node unavailability %",
        )
        twin_axis.axhline(
            (1 - AVAILABILITY_TARGET) * 100,
            color="tab:orange",
            linestyle=":",
            linewidth=1,
            label="unavailability target",
        )
        twin_axis.set_ylabel("node unavailability, %")
        handles = left.get_legend_handles_labels()
        more = twin_axis.get_legend_handles_labels()
        left.legend(
            handles[0] + more[0],
            handles[1] + more[1],
            fontsize=8,
            ncol=2,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.1),
        )
        left.set_title(f"Fleet twin: {twin.job.nodes} nodes, {twin.job.days:g} days")
    if scale:
        labels = [f"{r.failing}/{r.nodes}" for r in scale.shares]
        for key, name in (
            ("p50_s", "p50"),
            ("p90_s", "p90"),
            ("p99_s", "p99"),
            ("floor_p90_s", "baseline p90"),
        ):
            right.plot(
                labels,
                [getattr(r, key) for r in scale.shares],
                marker="o",
                label=name,
                linestyle="--" if "floor" in key else "-",
            )
        right.axhline(scale.target_p90_s, color="grey", linestyle=":", label="target p90")
        right.set_xlabel("nodes failing at once")
        right.set_ylabel("detection → cordon, s")
        right.legend(fontsize=8)
        right.set_title("Detection → cordon (dev server, one machine)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    twin_file, scale_file = RESULTS / "twin.json", RESULTS / "scale.json"
    twin = TwinReport.model_validate_json(twin_file.read_text()) if twin_file.exists() else None
    scale = ScaleReport.model_validate_json(scale_file.read_text()) if scale_file.exists() else None
    if not (twin or scale):
        raise SystemExit("no results: run bench/fleet_twin.py and bench/scale_bench.py first")
    lines = [
        "# remedy benchmark report",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({platform.machine()}, Python {platform.python_version()}); figures from the last "
        "run of each bench (`make bench` runs them all; a section that says when it finished "
        "may have been run alone since).",
        "",
        "![goodput, availability and latency](fleet.png)",
        "",
    ]
    if twin:
        lines += twin_section(twin) + [""]
    if (slow_file := RESULTS / "slow_nodes.json").exists():
        lines += slow_node_section(SlowNodeReport.model_validate_json(slow_file.read_text())) + [""]
    if scale:
        lines += scale_section(scale) + [""]
    if (kube_file := RESULTS / "kube_scale.json").exists():
        lines += markdown_section(KubeScaleReport.model_validate_json(kube_file.read_text())) + [""]
    if (budget_file := RESULTS / "budget.json").exists():
        lines += budget_section(BudgetReport.model_validate_json(budget_file.read_text())) + [""]
    if (scale_out := RESULTS / "scale_out.md").exists():  # bench/scale_out_bench.py writes it
        lines += scale_out.read_text().splitlines() + [""]
    plot(twin, scale, RESULTS / "fleet.png")
    report = RESULTS / "report.md"
    chaos = section_in(report.read_text()) if report.exists() else []  # `make chaos` writes it
    report.write_text("\n".join(lines))
    if chaos:
        keep_section(report, chaos)
    print(f"wrote {RESULTS / 'report.md'} and {RESULTS / 'fleet.png'}")


if __name__ == "__main__":
    main()
