"""The embedded demo: real dev server, real workflows, simulated fleet."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from remedy.ladder.remediation import Outcome
from tests.conftest import ROOT
from tests.processes import Children, free_port
from workers.cli import app
from workers.demo_config import DemoConfig
from workers.demo_run import run_demo


async def a_ladder_finished(client: Client, pool: str, patience_s: float = 180) -> None:
    query = (
        f"WorkflowType = 'NodeRemediation' AND RemedyPool = '{pool}' "
        "AND ExecutionStatus = 'Completed'"
    )
    for _ in range(int(patience_s / 0.5)):
        async for _finished in client.list_workflows(query, limit=1):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"no ladder of pool {pool} finished within {patience_s:g} s")


async def test_short_demo_starts_workflows_visible_through_the_client(
    dev_env: WorkflowEnvironment,
) -> None:
    name = f"demo-{uuid.uuid4().hex[:8]}"
    # The server fires timers to about a second, whatever the speedup: give ladders time.
    config = DemoConfig(
        nodes=4,
        fault_every_s=0.25,
        speedup=3600,
        duration_s=None,  # until the test stops it (Ctrl-C's path): a ladder must finish first
        runbooks=ROOT / "runbooks",
        node_prefix=name,
        pool=name,
        task_queue=name,
        agents_task_queue=f"{name}-agents",
        job_namespace=name,
    )
    said: list[str] = []
    demo = asyncio.create_task(run_demo(dev_env.client, config, echo=said.append))
    # A fixed duration ended, on a loaded machine, with every ladder still running: run at
    # least 12 s, and on until one of its ladders has finished (bounded against a hang).
    await asyncio.gather(asyncio.sleep(12), a_ladder_finished(dev_env.client, name))
    demo.cancel()  # caught inside: the demo stops injecting, then summarises
    summary = await demo

    assert summary.faults_injected >= 8
    assert summary.workflow_ids and all(
        w.startswith(f"node-remediation/{name}-") for w in summary.workflow_ids
    )
    assert sum(summary.outcomes.values()) == len(summary.runs) >= len(summary.workflow_ids)
    finished = {Outcome(o) for o in summary.outcomes if not o.startswith("running")}
    assert finished, f"no ladder finished within the demo: {summary.outcomes}"
    for workflow_id in summary.workflow_ids:
        description = await dev_env.client.get_workflow_handle(workflow_id).describe()
        assert description.workflow_type == "NodeRemediation"
        assert description.task_queue == name
        assert description.status in (
            WorkflowExecutionStatus.RUNNING,
            WorkflowExecutionStatus.COMPLETED,
        )
    # What the UI's list shows. Runs that continued-as-new carry none (the SDK cannot pass a
    # summary on), so check the runs the demo started itself.
    lines = []
    for workflow_id, run_id in summary.runs:
        run = await dev_env.client.get_workflow_handle(workflow_id, run_id=run_id).describe()
        if line := await run.static_summary():
            node = workflow_id.removeprefix("node-remediation/")
            assert line.startswith(f"{node}: ") and " → " in line, line
            lines.append(line)
    assert lines
    # The guarded job on the 4 nodes: a fault killed it, the scan handed it to its guard.
    assert (
        f"Guarded job      {name}/llm-pretrain-0 on {name}-000, {name}-001, {name}-002, "
        f"{name}-003" in said
    )
    assert any(
        line.startswith(f"  job    {name}/llm-pretrain-0: every rank failed") for line in said
    )
    [job] = summary.jobs
    assert job.job == f"{name}/llm-pretrain-0" and job.ledger.failures
    assert "Guarded jobs (remedy status --jobs):" in said


REMEDY = str(Path(sys.executable).parent / "remedy")
SMALL = ["--nodes", "4", "--fault-every", "0.5"]


def _own_ui_port(args: Sequence[str]) -> list[str]:
    """A demo's UI port of its own: two demos at once (xdist) would both see the default 8233
    free and both try to bind it, and the later dev server exits."""
    return [*args] if "--ui-port" in args else [*args, "--ui-port", str(free_port())]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


def _demo(
    processes: Children, cwd: Path, *args: str, command: tuple[str, ...] = (REMEDY, "demo")
) -> str:
    """A demo run to its end (``--duration``): what it printed, stdout then stderr, which must
    hold no traceback."""
    done = processes.run(
        _own_ui_port([*command, *args]),
        timeout=120,
        env=_clean_env(),
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_remedy_demo_command_runs_and_ends_with_a_summary(
    tmp_path: Path, processes: Children
) -> None:
    """What `make demo` runs, with a limit: its own dev server, UI, worker and fleet."""
    db = tmp_path / "t.sqlite"
    out = _demo(processes, tmp_path, "--duration", "6", *SMALL, "--db", str(db))
    assert out.startswith(f"History          fresh: {db} (a later run with --resume goes on")
    assert "Temporal Web UI  http://127.0.0.1:" in out
    assert "Remediations by outcome (" in out
    assert db.exists()


def test_a_second_demo_starts_on_a_fresh_database_unless_resumed(
    tmp_path: Path, processes: Children
) -> None:
    """Not the last run's ladders holding leases and its guards holding jobs: a new database,
    the last one kept aside; with --resume, the same database and its workflows."""
    folder = tmp_path / ".demo"
    db, kept = folder / "temporal.sqlite", folder / "temporal.previous.sqlite"
    _demo(processes, tmp_path, "--duration", "2", *SMALL)
    first = db.stat().st_ino

    out = _demo(processes, tmp_path, "--duration", "1", *SMALL)
    assert out.startswith("History          fresh: .demo/temporal.sqlite (the last run's is ")
    assert kept.stat().st_ino == first and db.stat().st_ino != first
    second = db.stat().st_ino

    out = _demo(processes, tmp_path, "--duration", "1", *SMALL, "--resume")
    assert out.startswith("History          resumed: .demo/temporal.sqlite, the last run's ")
    assert db.stat().st_ino == second and kept.stat().st_ino == first


def test_a_short_demo_prints_one_line_per_handled_event_not_a_traceback(
    tmp_path: Path, processes: Children
) -> None:
    """A flaky API server refuses the first cordons: the Temporal worker logs each failed
    activity with its stack, the ladder retries it, and the console says so in one line."""
    flaky = (sys.executable, str(ROOT / "tests" / "flaky_demo.py"))
    out = _demo(processes, tmp_path, "--duration", "4", *SMALL, "--db", "f.sqlite", command=flaky)
    refused = [line for line in out.splitlines() if "activity cordon failed" in line]
    assert refused, out
    assert all(
        re.fullmatch(
            r"  warn   activity cordon failed \(attempt \d+, node-remediation/gpu-node-\d+\): "
            r"TransientError: the API server is down",
            line,
        )
        for line in refused
    ), refused
    assert "Remediations by outcome (" in out


@pytest.mark.skipif(sys.platform != "linux", reason="the server learns of it by PR_SET_PDEATHSIG")
def test_killing_the_demo_takes_its_dev_server_down(tmp_path: Path, processes: Children) -> None:
    """SIGKILL gives the demo no chance to stop its server: the server goes by itself."""
    db = tmp_path / "k.sqlite"
    demo = processes.start(
        _own_ui_port([REMEDY, "demo", *SMALL, "--db", str(db)]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
    )
    try:
        assert demo.stdout is not None
        lines = (line for line in demo.stdout if line.startswith("Temporal server"))
        host, port = next(lines).split()[2].split(":")
        demo.kill()  # the demo alone, not its group: the server must notice by itself
        demo.wait(30)
        for _ in range(600):  # a bound against a hang (the server may take its 15 s to stop)
            with socket.socket() as probe:
                if probe.connect_ex((host, int(port))) != 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the dev server on {host}:{port} outlived the demo")
    finally:
        _kill_servers_of(db)


def _kill_servers_of(db: Path) -> None:
    """Whatever still runs on this test's database (a server left behind), by its pid."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and str(db).encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)


def test_ctrl_c_stops_the_demo_cleanly_with_a_summary(tmp_path: Path, processes: Children) -> None:
    demo = processes.start(
        _own_ui_port([REMEDY, "demo", *SMALL, "--db", str(tmp_path / "c.sqlite")]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_clean_env(),
        cwd=tmp_path,
    )
    assert demo.stdout is not None
    lines = []
    for line in demo.stdout:  # wait until faults flow, then press Ctrl-C
        lines.append(line)
        if line.startswith("  fault"):
            break
    else:  # its output ended before any fault: say how it ended, not a StopIteration
        _, err = demo.communicate(timeout=60)
        raise AssertionError(
            f"the demo ended (exit {demo.returncode}) before any fault; its output:\n"
            f"{''.join(lines)[-3000:]}\nstderr's end:\n{err[-3000:]}"
        )
    server = next(line.split()[2] for line in lines if line.startswith("Temporal server"))
    demo.send_signal(signal.SIGINT)
    try:
        out, err = demo.communicate(timeout=60)
    except subprocess.TimeoutExpired as late:  # say where it stuck, not a truncated repr
        raise AssertionError(
            "the demo did not stop within 60 s of Ctrl-C; its output's end:\n"
            f"{_text(late.output)[-3000:]}\nstderr's end:\n{_text(late.stderr)[-2000:]}"
        ) from None
    assert demo.returncode == 0, err[-2000:]
    assert "Traceback" not in err
    assert "Remediations by outcome (" in out
    host, port = server.split(":")
    with socket.socket() as probe:  # the dev server went down with the demo
        assert probe.connect_ex((host, int(port))) != 0


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def test_demo_on_a_busy_port_says_so_without_a_traceback() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["demo", "--port", str(port), "--duration", "1"])
    assert result.exit_code == 1
    assert f"port {port} is already in use" in result.output
    assert "Traceback" not in result.output


def test_resume_is_refused_with_an_address() -> None:
    result = CliRunner().invoke(app, ["demo", "--address", "127.0.0.1:1", "--resume"])
    assert result.exit_code == 1
    assert "--resume is for the embedded dev server" in result.output


def test_runbooks_validate_accepts_the_shipped_runbooks() -> None:
    result = CliRunner().invoke(app, ["runbooks", "validate", str(ROOT / "runbooks")])
    assert result.exit_code == 0, result.output
    assert "ok  gpu-fallen-off-bus: drain → reboot → diagnose → replace" in result.output


def test_runbooks_validate_lists_each_error_as_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmatch: {xids: [48]}\ntolerance: -1m\nladder:\n  - action: melt\n")
    result = CliRunner().invoke(app, ["runbooks", "validate", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:3: tolerance: duration must not be negative" in result.output
    assert f"{bad}:5: ladder[0].action: Input should be" in result.output
    assert "nothing loaded" in result.output


def test_cli_bad_input_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "runbooks"
    broken.mkdir()
    (broken / "a.yaml").write_text("name: lonely\n")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: x\n    verdict: maybe\n    when: {}\n")
    cases = [
        (["probe", "--simulate", "bogus"], 1, "--simulate: unknown fault 'bogus'"),
        (["xid", "parse", str(tmp_path / "missing.log")], 1, "cannot read"),
        (
            ["agent", "--node", "n1", "--runbooks", str(broken)],
            1,
            f"{broken / 'a.yaml'}:1: match: required field is missing",
        ),
        (["controller", "--runbooks", str(broken)], 1, "match: required field is missing"),
        (["controller", "--max-disruption", "two"], 1, "--max-disruption: 'two' is not"),
        (["controller", "--blocklist-incidents", "0"], 1, "--blocklist-incidents: "),
        (["controller", "--blocklist-days", "-1"], 1, "--blocklist-days"),
        (["controller", "--scan-every", "-5"], 1, "--scan-every"),
        (["controller", "--job-rules", str(rules)], 1, f"{rules}:3: rules.0.verdict: Input "),
    ]
    for args, code, message in cases:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == code, (args, result.output)
        assert message in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
