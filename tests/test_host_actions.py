"""The agent's own actions fail loudly when they did nothing: a missing tool, a reboot command
that exits non-zero, no GPU to reset, an action the agent was not started to allow. Real
subprocesses (scripts in tmp_path); each failure crosses the activity boundary as a
non-retryable Temporal error of its own type, so no retry policy runs it again."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.node import NodeActivities
from adapters.host.dependencies import REBOOT_COMMAND, Setup
from adapters.host.local import DEFAULT_REBOOT_COMMAND, LocalHost
from adapters.sim import SimFleet
from remedy.core.errors import ActionFailed, ActionRefused
from remedy.core.models import Action, ActionRequest, NodeRef
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe import ProbeConfig
from workflows.common import PERMANENT_ERRORS

pytestmark = pytest.mark.server  # the host actions run scripts as processes

NODE = "gpu-node-000"


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


class TwinNvmlHost(LocalHost):
    """The real host actions over the twin's NVML (the probe's seam): what a reset asks NVML
    first (adapters/host/mig.py) is answered by a simulated GPU table, not a missing driver."""

    fleet: SimFleet

    def nvml(self) -> NvmlApi:
        return self.fleet.host(NODE).nvml()


def host(tmp_path: Path, fleet: SimFleet | None = None, **kw: object) -> LocalHost:
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("boot-a\n")
    local = TwinNvmlHost(
        NODE, ProbeConfig(expected_gpus=1), state_dir=tmp_path, boot_id_file=boot_id, **kw
    )  # type: ignore[arg-type]
    local.fleet = fleet or SimFleet(nodes=1)
    return local


def through_activity(local: LocalHost, action: str, gpus: list[int] | None = None) -> Exception:
    """Run the real activity and answer the error Temporal would see."""
    acts = NodeActivities(lambda _: local)
    req = ActionRequest(
        node=NodeRef(name=NODE),
        action=Action(action),
        reason="Xid79",
        workflow_id=f"node-remediation/{NODE}",
        key=f"ladder-1/{action}",
        gpu_indices=gpus or [],
    )
    with pytest.raises(ApplicationError) as failed:
        ActivityEnvironment().run(getattr(acts, action), req)
    return failed.value


def assert_permanent(error: Exception, kind: type[Exception], says: str) -> None:
    assert isinstance(error, ApplicationError)
    assert error.type == kind.__name__ and error.non_retryable, error
    assert error.type in PERMANENT_ERRORS  # the ladder's retry policies skip it too
    assert says in str(error), str(error)


def test_a_reboot_command_that_exits_non_zero_fails_with_its_stderr(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    fake = script(
        tmp_path / "reboot",
        f"echo run >> {runs}\necho 'Failed to connect to bus: No such file' >&2\nexit 1",
    )
    local = host(tmp_path, allow_reboot=True, reboot_command=(str(fake), "now"))
    error = through_activity(local, "reboot")
    assert_permanent(error, ActionFailed, "now exited 1: Failed to connect to bus: No such file")
    assert runs.read_text() == "run\n"  # ran once; nothing retried it


def test_a_missing_reboot_tool_is_a_permanent_failure_naming_it(tmp_path: Path) -> None:
    local = host(tmp_path, allow_reboot=True, reboot_command=("no-such-nsenter", "-t", "1"))
    error = through_activity(local, "reboot")
    assert_permanent(error, ActionFailed, "no-such-nsenter is not installed on this node")


def test_a_reboot_command_that_works_is_issued(tmp_path: Path) -> None:
    fake = script(tmp_path / "reboot", f"touch {tmp_path / 'rebooted'}")
    local = host(tmp_path, allow_reboot=True, reboot_command=(str(fake),))
    assert local.reboot("k") == f"reboot issued: {fake}"
    assert (tmp_path / "rebooted").exists()


def test_a_missing_nvidia_smi_is_a_permanent_failure_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    error = through_activity(host(tmp_path, allow_reset=True), "reset_gpu", [0])
    assert_permanent(error, ActionFailed, "nvidia-smi is not installed on this node")


def test_a_reset_nvidia_smi_refuses_fails_with_what_it_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(
        tmp_path / "nvidia-smi",
        "echo 'Unable to reset GPU 00000000:5A:00.0 because it is in use.'\nexit 255",
    )
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    error = through_activity(host(tmp_path, allow_reset=True), "reset_gpu", [0])
    assert_permanent(error, ActionFailed, "exited 255: Unable to reset GPU 00000000:5A:00.0")


def test_a_reset_with_no_gpu_to_reset_fails(tmp_path: Path) -> None:
    fleet = SimFleet(nodes=1)
    fleet.break_nvml(NODE, "driver")  # NVML sees nothing, and the node expects no GPU count

    class NoGpus(LocalHost):
        def nvml(self) -> NvmlApi:
            return fleet.host(NODE).nvml()

    local = NoGpus(NODE, ProbeConfig(), allow_reset=True, state_dir=tmp_path)
    error = through_activity(local, "reset_gpu")
    assert_permanent(error, ActionFailed, f"no GPU to reset on {NODE}")


@pytest.mark.parametrize(
    ("action", "flag"), [("reset_gpu", "--allow-reset"), ("reboot", "--allow-reboot")]
)
def test_actions_the_agent_does_not_allow_are_refused_naming_the_flag(
    tmp_path: Path, action: str, flag: str
) -> None:
    error = through_activity(host(tmp_path), action, [0])
    assert_permanent(error, ActionRefused, f"start the agent with {flag}")


def test_the_default_reboot_command_is_the_one_its_dependency_check_checks(tmp_path: Path) -> None:
    """One spelling: what the agent issues, what `--reboot-command` shows, what doctor checks."""
    local = host(tmp_path, allow_reboot=True, dry_run=True)
    assert local.reboot("k") == "dry run: would reboot (systemctl reboot)"
    assert tuple(shlex.split(DEFAULT_REBOOT_COMMAND)) == REBOOT_COMMAND
    assert Setup(ProbeConfig()).reboot_command == REBOOT_COMMAND


# -- an action that is one command (activities.node's ``_command``) ---------------------------
def test_a_command_action_runs_once_per_key_and_only_where_allowed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    fake = str(script(tmp_path / "restart", f"echo run >> {runs}"))
    with pytest.raises(ActionRefused, match="start the agent with --allow-reset"):
        host(tmp_path).run_action(Action.RESET_GPU, [fake], "k1")  # a hardware action
    local = host(tmp_path, allow_reset=True)
    assert local.run_action(Action.RESET_GPU, [fake, "now"], "k1") == f"ran {fake} now"
    local.run_action(Action.RESET_GPU, [fake, "now"], "k1")  # a retry: answered, not run
    assert runs.read_text() == "run\n"
    dry = host(tmp_path, allow_reset=True, dry_run=True)
    assert dry.run_action(Action.RESET_GPU, [fake], "k2") == f"dry run: would run {fake}"


def test_a_command_that_fails_is_a_failure_a_retry_may_run_again(tmp_path: Path) -> None:
    fake = str(script(tmp_path / "restart", "echo 'unit not found' >&2\nexit 5"))
    local = host(tmp_path, allow_reset=True)
    for _ in range(2):  # a failed run did not happen: the same key runs it again
        with pytest.raises(ActionFailed, match="exited 5: unit not found"):
            local.run_action(Action.RESET_GPU, [fake], "k1")


def test_the_simulation_clears_what_the_fault_table_says_the_action_clears() -> None:
    fleet = SimFleet(nodes=1)
    fleet.inject(NODE, "job_hang", gpu=1)  # cleared by a killed job or a reset
    fleet.inject(NODE, "gpu_lost", gpu=2)  # only by a reboot
    sim = fleet.host(NODE)
    assert sim.run_action(Action.KILL_JOB, ["true"], "k1") == "ran true"
    assert sim.run_action(Action.KILL_JOB, ["true"], "k1") == "ran true"  # once for the key
    assert [f.kind for f in fleet.node(NODE).faults] == ["gpu_lost"]
    assert fleet.actions == [(NODE, "kill_job")]
