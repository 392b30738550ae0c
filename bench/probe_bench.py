"""What one probe of an 8-GPU node costs: the simulated backend always, and real GPUs with
`nvidia-smi -q` side by side when NVML works on this machine. Target: ≤ 50 ms on real GPUs.

    .venv/bin/python bench/probe_bench.py [--runs 500]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable

from adapters.host.nvml import real_nvml
from adapters.sim import SimFleet
from remedy.detection import gpu as nv
from remedy.detection.probe import ProbeConfig, probe_node

TARGET_MS = 50.0


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and p99 in milliseconds."""
    fn()  # warm up: imports, first NVML init
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def row(name: str, runs: int, figures: tuple[float, float] | None, note: str = "") -> str:
    if figures is None:
        return f"| {name:<34} | {runs:>5} | {'-':>9} | {'-':>9} | {note}"
    median, p99 = figures
    return f"| {name:<34} | {runs:>5} | {median:>9.2f} | {p99:>9.2f} | {note}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--smi-runs", type=int, default=10)
    args = parser.parse_args()

    fleet = SimFleet(nodes=1, gpus_per_node=8)
    node = next(iter(fleet.nodes))
    host = fleet.host(node)
    sim = timed(lambda: probe_node(node, host.nvml(), host.probe_config), args.runs)

    print(f"probe cost per node (ms), target ≤ {TARGET_MS:g} ms for 8 real GPUs")
    print("| backend                            |  runs |    median |       p99 | note")
    print("|------------------------------------|-------|-----------|-----------|-----")
    print(
        row(
            "simulated NVML, 8 GPUs + 8 NICs",
            args.runs,
            sim,
            "the probe's own overhead (threads, timeouts, models)",
        )
    )

    nvml = real_nvml()
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
        nvml.nvmlShutdown()
    except nv.NVMLError as exc:
        print(row("real NVML", 0, None, f"not available here: {exc}"))
        return
    real = timed(lambda: probe_node("local", nvml, ProbeConfig(expected_gpus=count)), args.runs)
    verdict = "meets" if real[0] <= TARGET_MS else "MISSES"
    print(
        row(f"real NVML, {count} GPUs", args.runs, real, f"{verdict} the {TARGET_MS:g} ms target")
    )
    smi = shutil.which("nvidia-smi")
    if smi:
        baseline = timed(
            lambda: subprocess.run([smi, "-q"], capture_output=True, check=True), args.smi_runs
        )
        print(
            row(
                "nvidia-smi -q (baseline)",
                args.smi_runs,
                baseline,
                f"remedy's probe is {baseline[0] / real[0]:.0f}× faster at the median",
            )
        )


if __name__ == "__main__":
    main()
