"""The short chaos run (chaos/, `python -m chaos --short`): a dev server, a controller and the
simulated agents as real processes, killed and restarted, the server stopped, answers lost,
the cluster API down, the budget terminated, reports repeated — and every promise kept: no
disruptive action twice, no ladder lost or stuck, no cordon left with nobody owning it, no
more nodes disrupted at once than the pool's cap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.config import SHORT
from chaos.experiments import EXPERIMENTS
from chaos.measure import Row
from chaos.run import run
from tests.processes import Children

ROOT = Path(__file__).resolve().parent.parent
# What each experiment must have done for its zeros to mean anything.
DID = {
    "a": ["controller killed", "agents killed"],
    # Not "repeats" too: after a death the ladder either retries the reboot on the restarted
    # agent (answered from its ledger: a repeat) or, the agent not back within the rung's
    # scaled timeout, confirms the new boot id from the controller; which one depends on how
    # fast the agents restart (a loaded machine took the second in every ladder). Both must
    # reboot once (row.doubled); the answer from the ledger after a death is
    # tests/test_chaos_store.py's (a process killed right after the effect).
    "b": ["deaths"],
    "c": ["server outages"],
    "d": ["answers_lost"],
    "e": ["failed_before"],
    "f": ["api_refused"],
    "g": ["budget terminated"],
    "h": ["duplicate reports"],
}


@pytest.mark.server  # the harness starts its processes itself
@pytest.mark.timeout(900)
async def test_the_short_chaos_run_keeps_every_promise(tmp_path: Path) -> None:
    rows = await run(EXPERIMENTS, SHORT, seed=1, workdir=tmp_path, at_once=SHORT.at_once)
    assert [r.key for r in rows] == list(DID)
    for row in rows:
        assert_kept(row)
        assert all(row.events[what] > 0 for what in DID[row.key]), (row.key, row.events)


def assert_kept(row: Row) -> None:
    where = f"({row.key}) {row.title}"
    assert row.faults == SHORT.ladders and row.ladders == row.faults, where  # none from stale
    assert row.doubled == [], where
    assert row.lost == [], where
    assert row.stuck == [], f"{where}: {'; '.join(row.stuck_at)}"
    assert row.orphaned == [], where
    assert row.stale == [], where
    assert 0 < row.peak <= row.cap, where


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_harness_stops_every_process_it_started(
    tmp_path: Path, sig: signal.Signals, processes: Children
) -> None:
    harness = processes.start(
        [sys.executable, "-m", "chaos", "--short", "--only", "a", "--workdir", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started = _ours(tmp_path)
    while len(started) < 4 and harness.poll() is None:  # itself, server, controller, agents
        time.sleep(0.2)
        started = _ours(tmp_path)
    assert len(started) >= 4
    harness.send_signal(sig)
    assert harness.wait(60) != 0
    assert _ours(tmp_path) == [], "left running"


def _ours(workdir: Path) -> list[int]:
    """Processes whose command line names the run's work directory (its fleet file, logs or
    SQLite file)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(workdir).encode() in cmdline and int(pid) != os.getpid():
            found.append(int(pid))
    return found
