"""The dependency checks on a machine of the test's own making (adapters/host/dependencies.py),
and `remedy doctor` on this GPU-less machine: a line per dependency, exit 1, no traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from adapters.host.dependencies import RECHECK_EXPENSIVE_S, HostDependencies, Machine, Setup
from adapters.host.kernel_log import KernelLogTail
from adapters.host.kernel_sources import JournalSource
from adapters.host.nics import INFINIBAND
from remedy.acting.capabilities import Dependency, DependencyCheck, capabilities_from
from remedy.core.models import Action
from remedy.detection import gpu as nv
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe import ProbeConfig
from tests.conftest import ROOT
from tests.processes import Children
from workers.cli import app

NSENTER = ("nsenter", "-t", "1", "-m", "--", "systemctl", "reboot")


class FakeNvml:
    def __init__(self, count: int | None) -> None:
        self.count = count  # None: the library is there, the driver is not

    def nvmlInit(self) -> None:
        if self.count is None:
            raise nv.NVMLError(nv.NVML_ERROR_DRIVER_NOT_LOADED)

    def nvmlDeviceGetCount(self) -> int:
        assert self.count is not None
        return self.count

    def nvmlShutdown(self) -> None:
        pass


class Host:
    """A machine: its tools, its modules, what nsenter answers, and every command run."""

    def __init__(self, tmp: Path, tools: Sequence[str] = (), modules: Sequence[str] = ()) -> None:
        self.tools, self.modules = set(tools), set(modules)
        # By the command's last word; systemd answers that it runs unless told otherwise.
        self.answers: dict[str, tuple[int, str]] = {"is-system-running": (0, "running")}
        self.ran: list[list[str]] = []
        self.gpus: int | None = 8
        self.infiniband = tmp / "infiniband"

    def run(self, command: Sequence[str]) -> tuple[int, str]:
        self.ran.append(list(command))
        return self.answers.get(command[-1], (0, ""))

    def machine(self) -> Machine:
        return Machine(
            nvml=lambda: cast(NvmlApi, FakeNvml(self.gpus)),
            which=lambda tool: f"/usr/bin/{tool}" if tool in self.tools else None,
            run=self.run,
            has_module=lambda name: name in self.modules,
            infiniband=self.infiniband,
            kmsg=self.infiniband / "no-kmsg",
            kern_log=self.infiniband / "no-kern.log",
        )


def checks(host: Host, **setup: Any) -> dict[str, DependencyCheck]:
    probe = setup.pop("probe", ProbeConfig(expected_gpus=8))
    found = HostDependencies(Setup(probe, **setup), host.machine()).check()
    assert [c.name for c in found] == list(Dependency)  # one each, in order
    return {c.name: c for c in found}


def test_a_fully_equipped_node_is_ready(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["nvidia-smi", "nsenter", "dcgmi"])
    log = tmp_path / "kern.log"
    log.write_text("")
    probe = ProbeConfig(expected_gpus=8, kernel_log=KernelLogTail(log))
    found = checks(host, probe=probe, allow_reset=True, allow_reboot=True, reboot_command=NSENTER)
    assert all(c.ok for c in found.values()), found
    assert "DCGM" in found["load_test"].detail
    # The reboot path was checked by entering pid 1's namespaces, never by rebooting; DCGM by
    # asking its host engine for the GPUs.
    assert host.ran == [
        ["nsenter", "-t", "1", "-m", "--", "true"],
        ["nsenter", "-t", "1", "-m", "--", "sh", "-c", 'command -v "systemctl"'],
        ["nsenter", "-t", "1", "-m", "--", "systemctl", "is-system-running"],
        ["/usr/bin/dcgmi", "discovery", "-l"],
    ]
    assert capabilities_from(list(found.values())).ready


def test_dcgm_whose_host_engine_does_not_answer_is_no_engine(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["dcgmi"])
    host.answers["10.0.0.7:5555"] = (255, "Error: unable to connect to the host engine")
    found = checks(host, dcgm_host="10.0.0.7:5555")
    assert not found["load_test"].ok
    said = found["load_test"].detail
    assert "DCGM host engine is not reachable" in said and "Error: unable to connect" in said
    assert ["/usr/bin/dcgmi", "discovery", "-l", "--host", "10.0.0.7:5555"] in host.ran
    host.modules.add("torch")  # the built-in test then
    assert (
        checks(host, dcgm_host="10.0.0.7:5555")["load_test"].detail == "built-in load test on torch"
    )


def test_each_missing_dependency_says_why_and_what_the_node_cannot_do(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["nsenter"])
    host.gpus = 7
    (tmp_path / "infiniband" / "mlx5_0").mkdir(parents=True)
    host.answers["true"] = (1, "nsenter: reassociate to namespace 'ns/mnt' failed")
    found = checks(host, reboot_command=NSENTER)
    assert not any(c.ok for c in found.values()), found
    assert found["nvml"].detail == "NVML sees 7 of 8 GPUs"
    assert "nvidia-smi is not on PATH" in found["reset_tool"].detail
    assert "--allow-reset" in found["reset_tool"].detail
    assert "--allow-reboot" in found["reboot_path"].detail
    assert "cannot enter the host's namespaces" in found["reboot_path"].detail
    assert "no load-test engine" in found["load_test"].detail
    assert "no kernel log configured" in found["kernel_log"].detail
    assert (
        "mlx5_0" in found["nic_config"].detail and "--expected-nics" in found["nic_config"].detail
    )
    capabilities = capabilities_from(list(found.values()))
    why = capabilities.why_not(Action.RESET_GPU)
    assert why is not None and why.startswith("reset_tool: nvidia-smi is not on PATH")
    assert capabilities.why_not(Action.DIAGNOSE) is not None
    assert capabilities.why_not(Action.DRAIN) is None  # the controller's, not the node's


def test_partial_answers(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["nvidia-smi", "nsenter"], modules=["cupy"])
    host.gpus = None
    host.answers['command -v "systemctl"'] = (1, "")
    found = checks(
        host,
        probe=ProbeConfig(
            expected_gpus=None, expected_nics=8, kernel_log=KernelLogTail(tmp_path / "gone.log")
        ),
        allow_reset=True,
        allow_reboot=True,
        reboot_command=NSENTER,
    )
    assert "NVML cannot be used: NVMLError_DriverNotLoaded" in found["nvml"].detail
    assert found["reset_tool"].ok
    assert found["reboot_path"].detail == "systemctl is not found on the host"
    assert found["load_test"].ok and "cupy" in found["load_test"].detail
    assert not found["nic_config"].ok  # 8 expected, none present: not an expectation met
    assert found["nic_config"].detail.startswith("expects 8 RDMA devices, 0 present")
    assert "gone.log: No such file or directory" in found["kernel_log"].detail
    host.gpus = 8
    found = checks(host, probe=ProbeConfig(expected_gpus=None))
    assert not found["nvml"].ok and "--expected-gpus 8" in found["nvml"].detail


def test_the_nic_count_is_held_to_the_expectation(tmp_path: Path) -> None:
    host = Host(tmp_path)
    for device in ("mlx5_0", "mlx5_1"):
        (host.infiniband / device).mkdir(parents=True)

    def nics(expected: int) -> DependencyCheck:
        return checks(host, probe=ProbeConfig(expected_gpus=8, expected_nics=expected))[
            "nic_config"
        ]

    assert nics(2).ok and nics(2).detail == "expects 2 RDMA devices, 2 present"
    assert not nics(3).ok and "every probe will report NicMissing" in nics(3).detail
    assert not nics(1).ok and "(--expected-nics 2)" in nics(1).detail


def test_the_journal_is_asked_for_no_line_and_a_silent_one_is_missing(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["journalctl"])
    mounted = tmp_path / "host-journal"
    host.answers[str(mounted)] = (1, f"Failed to open {mounted}: No such file or directory")

    def journal(directory: Path | None) -> DependencyCheck:
        probe = ProbeConfig(expected_gpus=8, kernel_log=JournalSource(None, directory))
        return checks(host, probe=probe)["kernel_log"]

    missing = journal(mounted)
    assert not missing.ok
    assert missing.detail == (
        f"journalctl -k -b -n 0 --no-pager -q -D {mounted} exited 1: "
        f"Failed to open {mounted}: No such file or directory"
    )
    assert journal(None).detail == "reading the journal: journalctl answers"
    assert ["journalctl", "-k", "-b", "-n", "0", "--no-pager", "-q"] in host.ran  # no cursor
    host.tools.clear()
    assert journal(None).detail == "journalctl is not on PATH"


@pytest.mark.server  # doctor runs journalctl (when the machine has it)
def test_doctor_tries_the_kernel_log_it_is_given_and_counts_the_nics() -> None:
    present = len(list(INFINIBAND.iterdir())) if INFINIBAND.is_dir() else 0  # 0 on CI
    expected = present + 8
    result = CliRunner().invoke(
        app,
        ["doctor", "--json", "--kernel-log", "journal:/nonexistent"]
        + ["--expected-nics", str(expected)],
    )
    body = json.loads(result.output)
    checked = {c["name"]: c for c in body["checks"]}
    assert result.exit_code == 1 and not body["ready"]
    assert not checked["kernel_log"]["ok"], checked["kernel_log"]
    assert (
        "nonexistent" in checked["kernel_log"]["detail"]
        or "not on PATH" in (checked["kernel_log"]["detail"])
    )
    assert not checked["nic_config"]["ok"]
    assert checked["nic_config"]["detail"].startswith(
        f"expects {expected} RDMA devices, {present} present"
    )


def test_a_systemctl_without_systemd_cannot_reboot(tmp_path: Path) -> None:
    host = Host(tmp_path, tools=["systemctl"])
    host.answers["is-system-running"] = (1, "offline")  # a container's own systemctl
    found = checks(host, allow_reboot=True)
    assert found["reboot_path"].detail == "systemctl cannot reach systemd: offline"
    host.answers["is-system-running"] = (1, "degraded")  # a failed unit: systemd still answers
    assert checks(host, allow_reboot=True)["reboot_path"].ok
    assert host.ran[-1] == ["systemctl", "is-system-running"]


def test_a_node_without_gpus_needs_no_gpu_tooling(tmp_path: Path) -> None:
    found = checks(Host(tmp_path), probe=ProbeConfig(expected_gpus=0))
    assert {name for name, c in found.items() if not c.ok} == {"reboot_path"}


def test_the_reboot_path_is_checked_once_then_every_few_minutes(tmp_path: Path) -> None:
    host, now = Host(tmp_path, tools=["nsenter"]), [0.0]
    dependencies = HostDependencies(
        Setup(ProbeConfig(), allow_reboot=True, reboot_command=NSENTER),
        host.machine(),
        clock=lambda: now[0],
    )
    dependencies.check()
    dependencies.check()
    assert len(host.ran) == 3  # entered, looked up, asked systemd: once, cached since
    now[0] += RECHECK_EXPENSIVE_S + 1
    dependencies.check()
    dependencies.check(refresh=True)
    assert len(host.ran) == 9


def test_dcgms_host_engine_is_asked_once_then_every_few_minutes(tmp_path: Path) -> None:
    """A hung host engine costs a probe round its discovery timeout: not with every probe."""
    host, now = Host(tmp_path, tools=["dcgmi"]), [0.0]
    dependencies = HostDependencies(Setup(ProbeConfig()), host.machine(), clock=lambda: now[0])
    discovery = ["/usr/bin/dcgmi", "discovery", "-l"]
    dependencies.check()
    dependencies.check()
    assert host.ran.count(discovery) == 1
    now[0] += RECHECK_EXPENSIVE_S + 1
    dependencies.check()
    dependencies.check(refresh=True)
    assert host.ran.count(discovery) == 3


def test_doctor_on_this_gpu_less_machine_names_every_dependency_and_exits_1(
    processes: Children,
) -> None:
    done = processes.run(
        [sys.executable, "-m", "workers", "doctor", "--expected-gpus", "8"], cwd=ROOT, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    first, *lines = done.stdout.splitlines()
    assert "missing" in first and "nvml" in first
    assert [line.split()[1] for line in lines] == list(Dependency)
    assert lines[0].split()[0] == "MISSING" and "(so no probe)" in lines[0]


@pytest.mark.server  # the doctor runs the node's tools
def test_doctor_json_lists_the_checks_and_what_the_node_cannot_do() -> None:
    result = CliRunner().invoke(app, ["doctor", "--json", "--expected-gpus", "0"])
    body = json.loads(result.output)
    assert [c["name"] for c in body["checks"]] == list(Dependency)
    assert body["ready"] is (result.exit_code == 0)
    assert set(body["cannot"]) == {a for c in body["checks"] if not c["ok"] for a in c["enables"]}
