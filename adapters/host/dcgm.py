"""DCGM diagnostics on the node: `dcgmi diag -r LEVEL -j`, the trusted test the GPU operator
ships. Present means dcgmi is on PATH and answers `dcgmi discovery -l` (it reaches a host
engine). A hang is killed with everything it started and reported as "could not run"."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence

from adapters.host.output import tool_output
from remedy.core.models import Severity
from remedy.detection.probe.dcgm import ENGINE, parse_diag
from remedy.detection.probe.load import LoadReport, could_not_run
from remedy.detection.probe.throughput import slow_ranks

DISCOVERY_TIMEOUT_S = 15.0

Which = Callable[[str], str | None]
Run = Callable[[Sequence[str]], tuple[int | None, str]]  # exit status (None: hung), output


def _discover(command: Sequence[str]) -> tuple[int | None, str]:
    return run_bounded(list(command), DISCOVERY_TIMEOUT_S)


def dcgm_unavailable(
    dcgmi: str = "dcgmi", host: str = "", which: Which = shutil.which, run: Run = _discover
) -> str | None:
    """None when DCGM diagnostics can run here; otherwise what is missing. ``host``: the host
    engine's address (dcgmi's --host; empty: its default, localhost). ``which`` and ``run``: the
    machine's (the dependency check passes its own)."""
    where = which(dcgmi)
    if where is None:
        return f"{dcgmi} is not on PATH (DCGM is not installed in this image)"
    code, out = run([where, "discovery", "-l", *_host(host)])
    if code is None:
        return f"{dcgmi} discovery -l did not answer within {DISCOVERY_TIMEOUT_S:g}s"
    if code != 0:
        return f"the DCGM host engine is not reachable ({dcgmi} discovery -l exited {code}: {out})"
    return None


def run_dcgm_diag(
    gpus: list[int], level: int, timeout_s: float, dcgmi: str = "dcgmi", host: str = ""
) -> LoadReport:
    """One `dcgmi diag` over ``gpus`` (all when empty). Its own throughput figures, where the
    level runs the diagnostic plugin, are compared across peers."""
    command = [dcgmi, "diag", "-r", str(level), "-j", *_host(host)]
    if gpus:
        command += ["-i", ",".join(map(str, gpus))]
    shown = " ".join(command)
    code, out = run_bounded(command, timeout_s, keep_stdout=True)
    if code is None:
        return could_not_run(f"{shown} did not finish within {timeout_s:g}s (killed)", ENGINE)
    report = parse_diag(out, gpus)
    if code != 0 and report.ran and all(p.severity is Severity.INFO for p in report.problems):
        # dcgmi says it failed but no test did: do not call that a pass.
        return could_not_run(f"{shown} exited {code} with no failing test: {out[-300:]}", ENGINE)
    peers = slow_ranks(report.throughput)
    return report.model_copy(update={"problems": [*report.problems, *peers]})


def _host(host: str) -> list[str]:
    return ["--host", host] if host else []


def run_bounded(
    command: list[str], timeout_s: float, keep_stdout: bool = False
) -> tuple[int | None, str]:
    """Run ``command`` in its own process group; on timeout kill the whole group (a wedged
    diagnostic's children too) and answer (None, ""). Otherwise (exit code, output): stdout
    alone when ``keep_stdout`` (the JSON), else stdout and stderr, trimmed."""
    try:
        child = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        return 127, f"cannot run {command[0]}: {exc}"
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return None, ""
    if keep_stdout:
        return child.returncode, out if out.strip() else err
    return child.returncode, tool_output(" ".join((out + err).split()), 300)
