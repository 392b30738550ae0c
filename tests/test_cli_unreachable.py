"""Every command that connects to Temporal, pointed where nothing listens: one line on stderr,
``error: cannot reach Temporal at ADDRESS: reason``, exit 4, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import Children, free_port

pytestmark = pytest.mark.server  # the commands run as processes, from a module's fixture
REMEDY = str(Path(sys.executable).parent / "remedy")

COMMANDS = {
    "status": ["status"],
    "status --jobs": ["status", "--jobs"],
    "show": ["show", "gpu-node-1"],
    "approve": ["approve", "gpu-node-1"],
    "abort": ["abort", "gpu-node-1", "--reason", "test"],
    "clear": ["clear", "gpu-node-1"],
    "trigger": ["trigger", "gpu-node-1", "--runbook", "gpu-memory-ecc"],
    "resume-pool": ["resume-pool", "default"],
    "resume-job": ["resume-job", "train"],
    "demo --address": ["demo", "--duration", "5"],
    "agent": ["agent", "--node", "gpu-node-1"],
    "controller": ["controller", "--kubeconfig", "{kubeconfig}"],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, int, str]]:
    """Each command run once, all at the same time (a second each, in parallel)."""
    address = f"127.0.0.1:{free_port()}"
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    kubeconfig.write_text(  # a cluster that is not there either: the controller only loads it
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{free_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    argvs = {
        name: [REMEDY, *(a.format(kubeconfig=kubeconfig) for a in args)]
        for name, args in COMMANDS.items()
    }
    argvs["python -m workers status"] = [sys.executable, "-m", "workers", "status"]
    out = {}
    with Children() as children:
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        runs = {
            name: children.start([*argv, "--address", address], **pipes)
            for name, argv in argvs.items()
        }
        for name, run in runs.items():
            _, stderr = run.communicate(timeout=60)
            out[name] = (address, run.returncode, stderr)
    return out


@pytest.mark.parametrize("command", [*COMMANDS, "python -m workers status"])
def test_an_unreachable_server_is_one_line_and_exit_4(
    results: dict[str, tuple[str, int, str]], command: str
) -> None:
    address, code, stderr = results[command]
    assert "Traceback" not in stderr, stderr
    [line] = stderr.splitlines()
    assert line.startswith(f"error: cannot reach Temporal at {address}: "), stderr
    assert line.endswith("Connection refused"), "the core's words, without its Rust debug dump"
    assert code == 4, stderr
