"""The deep diagnose's load test: DCGM's real `dcgmi diag -j` shapes, run as a subprocess (a
fake `dcgmi` on PATH), the built-in engine's memory and throughput checks, and fail closed."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.host import load_test
from adapters.host.load_test import (
    GpuRun,
    LoadTestConfig,
    available_engines,
    engine_status,
    run_load_test,
)
from remedy.core.models import Severity
from remedy.detection.probe.dcgm import parse_diag
from remedy.detection.probe.load import LoadReason, LoadReport
from remedy.detection.probe.throughput import (
    REFERENCE_FILE,
    below_reference,
    compare_throughput,
    load_references,
)
from tests.conftest import ROOT
from workers.cli import app

FIXTURES = ROOT / "tests" / "data" / "dcgm"
V4_FAIL = FIXTURES / "v4_r3_gpu3_faulty_memory_gpu5_slow.json"
V4_SKIPPED = FIXTURES / "v4_r3_gpu5_skipped.json"  # v4_r3_pass.json, GPU 5's results all Skip
H100 = "NVIDIA H100 80GB HBM3"


def reasons(report: LoadReport) -> list[tuple[int | None, str]]:
    return [(p.gpu, p.reason.value) for p in report.problems]


# -- reading dcgmi diag -j ---------------------------------------------------------------------
def test_dcgm_4_failing_gpu_is_named_with_dcgms_reason() -> None:
    report = parse_diag(V4_FAIL.read_text())
    assert report.engine == "dcgm" and report.ran
    assert report.gpus == list(range(8))
    [failed] = report.problems
    assert (failed.gpu, failed.reason, failed.severity) == (
        3,
        LoadReason.DCGM_DIAG_FAILED,
        Severity.CRITICAL,
    )
    assert failed.evidence == (
        "GPU 3: DCGM memory fail: Found 1 faulty memory elements on GPU 3 (DCGM error 52)"
    )
    assert report.throughput[0] == pytest.approx(0.85908) and report.throughput[5] < 0.5


def test_dcgm_4_pass_with_skipped_tests_is_a_pass() -> None:
    report = parse_diag((FIXTURES / "v4_r3_pass.json").read_text())
    assert report.ran and report.problems == []


def test_dcgm_3_shape_blames_the_gpu_and_reads_deployment_results_for_all() -> None:
    report = parse_diag((FIXTURES / "v3_r3_gpu1_pcie_replays.json").read_text())
    assert report.gpus == [0, 1, 2, 3]
    assert reasons(report) == [(1, "DcgmDiagFailed")]
    assert "PCIe replays per minute for GPU 1" in report.problems[0].evidence


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ((FIXTURES / "v4_runtime_error.json").read_text(), "could not be run while DCGM is paused"),
        ("Error: unable to establish a connection to the specified host: localhost", "no JSON"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "ran no test"),
        ('{"something": "else"}', "no diagnostic"),
        ("", "no JSON"),
    ],
)
def test_an_answer_without_results_could_not_run(answer: str, says: str) -> None:
    report = parse_diag(answer)
    assert not report.ran
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]
    assert says in report.problems[0].evidence


def test_a_failure_only_the_test_summary_carries_is_a_node_problem() -> None:
    doc = json.loads((FIXTURES / "v4_r3_pass.json").read_text())
    [pcie] = doc["DCGM Diagnostic"]["test_categories"][1]["tests"]
    pcie["test_summary"] = {
        "status": "Fail",
        "warnings": [{"error_category": 16, "error_id": 1, "error_severity": 3, "warning": "x"}],
    }
    report = parse_diag(json.dumps(doc))
    assert reasons(report) == [(None, "DcgmDiagFailed")]
    assert report.problems[0].evidence == "node: DCGM pcie fail: x (DCGM error 1)"


def test_a_gpu_dcgm_skipped_is_untested_although_the_others_passed() -> None:
    """DCGM skips a busy GPU; before, any other GPU's test made the whole answer a pass."""
    report = parse_diag(V4_SKIPPED.read_text())
    assert not report.ran
    assert reasons(report) == [(5, "DiagnoseCouldNotRun")]
    assert report.problems[0].evidence == (
        "GPU 5: DCGM ran no test on it: every result was skipped or absent"
    )


def test_a_gpu_asked_for_that_dcgm_does_not_report_is_untested() -> None:
    report = parse_diag((FIXTURES / "v4_r3_pass.json").read_text(), asked=[0, 7, 8])
    assert reasons(report) == [(8, "DiagnoseCouldNotRun")]


def test_dcgm_3_node_wide_results_test_no_gpu_and_a_gpu_ids_list_tests_each() -> None:
    doc = json.loads((FIXTURES / "v3_r3_gpu1_pcie_replays.json").read_text())
    integration, memory = doc["DCGM GPU Diagnostic"]["test_categories"][1:3]
    for result in [*integration["tests"][0]["results"], *memory["tests"][0]["results"]]:
        if result["gpu_id"] == "2":
            result["status"] = "Skip"  # GPU 2 has only the Deployment tests' node-wide passes
    assert reasons(parse_diag(json.dumps(doc))) == [
        (1, "DcgmDiagFailed"),
        (2, "DiagnoseCouldNotRun"),
    ]
    memory["tests"][0]["results"].append({"gpu_ids": "0,1,2,3", "status": "Pass"})
    assert reasons(parse_diag(json.dumps(doc))) == [(1, "DcgmDiagFailed")]


def test_a_line_before_the_json_is_tolerated_and_warn_is_a_warning() -> None:
    doc = V4_FAIL.read_text().replace('"status": "Fail"', '"status": "Warn"', 1)
    report = parse_diag("WARNING: something the tool printed first\n" + doc)
    assert [(p.gpu, p.reason, p.severity) for p in report.problems] == [
        (3, LoadReason.DCGM_DIAG_WARNING, Severity.WARNING)
    ]


# -- a real dcgmi process --------------------------------------------------------------------
def fake_dcgmi(tmp_path: Path, diag: str, discovery: str = "exit 0") -> Path:
    """A `dcgmi` on PATH: ``discovery`` and ``diag`` are its shell bodies; it logs its argv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "dcgmi"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/argv\n'
        f'case "$1" in\n  discovery) {discovery} ;;\n  diag) {diag} ;;\nesac\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@pytest.fixture
def dcgm_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LoadTestConfig:
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return LoadTestConfig(engines=("dcgm",), dcgm_level=3, dcgm_timeout_s=2.0)


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_is_used_when_present_over_every_gpu_asked(
    tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, f"cat {V4_FAIL}; exit 226")  # dcgmi exits non-zero when a test fails
    assert available_engines(dcgm_only) == ["dcgm"]
    report = run_load_test(list(range(8)), dcgm_only)
    assert report.engine == "dcgm"
    assert reasons(report) == [(3, "DcgmDiagFailed"), (5, "SlowRank")]  # peers: DCGM's gflops
    assert (tmp_path / "argv").read_text().splitlines()[-1] == "diag -r 3 -j -i 0,1,2,3,4,5,6,7"


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_that_skipped_a_gpu_fails_it_with_no_other_engine(
    tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, f"cat {V4_SKIPPED}")
    report = run_load_test(list(range(8)), dcgm_only)
    assert reasons(report) == [(5, "DiagnoseCouldNotRun")]


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_host_engine_address_is_passed_on(tmp_path: Path, dcgm_only: LoadTestConfig) -> None:
    fake_dcgmi(tmp_path, f"cat {FIXTURES / 'v4_r3_pass.json'}")
    config = replace(dcgm_only, dcgm_host="10.0.0.7:5555")
    [note] = run_load_test([], config).problems  # passed; DCGM alone measured no throughput
    assert (note.reason, note.severity) == (LoadReason.NO_REFERENCE, Severity.INFO)
    assert (tmp_path / "argv").read_text().splitlines() == [
        "discovery -l --host 10.0.0.7:5555",
        "diag -r 3 -j --host 10.0.0.7:5555",  # no -i: every GPU
    ]


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_that_hangs_is_killed_and_could_not_run(
    tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, "sleep 60")
    report = run_load_test([0, 1], dcgm_only)
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]
    assert "dcgmi diag -r 3 -j -i 0,1 did not finish within 2s (killed)" in (
        report.problems[0].evidence
    )


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_answering_no_json_could_not_run(tmp_path: Path, dcgm_only: LoadTestConfig) -> None:
    fake_dcgmi(tmp_path, "echo 'Error: Unable to complete diagnostic.' >&2; exit 1")
    report = run_load_test([0], dcgm_only)
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]
    assert "Unable to complete diagnostic" in report.problems[0].evidence


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_exiting_non_zero_with_every_test_passed_is_not_a_pass(
    tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, f"cat {FIXTURES / 'v4_r3_pass.json'}; exit 1")
    assert reasons(run_load_test([0], dcgm_only)) == [(None, "DiagnoseCouldNotRun")]


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_without_a_host_engine_is_not_available(
    tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, "exit 0", discovery="echo 'Error: unable to connect' >&2; exit 255")
    assert available_engines(dcgm_only) == []
    why = engine_status(dcgm_only)["dcgm"]
    assert why is not None and "host engine is not reachable" in why
    report = run_load_test([0], dcgm_only)
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]
    assert "DCGM: the DCGM host engine is not reachable" in report.problems[0].evidence


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) for m in ("torch", "cupy")),
    reason="this checks a node without a compute library",
)
def test_no_engine_at_all_could_not_run_and_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert available_engines() == []
    report = run_load_test([0, 1])
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]
    said = report.problems[0].evidence
    assert "dcgmi is not on PATH" in said and "torch is not installed" in said
    assert "cupy is not installed" in said and "Dockerfile.gpu" in said


# -- the built-in engine (torch or cupy) -------------------------------------------------------
def test_built_in_engine_reports_memory_errors_crashes_and_slow_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def runner(gpu: int, seconds: float, fraction: float) -> GpuRun:
        if gpu == 4:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return GpuRun(700.0, H100, bad_words=3 if gpu == 2 else 0, words=1000)

    monkeypatch.setattr(load_test, "_torch_runner", lambda: runner)
    report = run_load_test([0, 1, 2, 3, 4], LoadTestConfig(engines=("torch",)))
    assert report.engine == "torch" and report.gpus == [0, 1, 2, 3, 4]
    assert reasons(report) == [(2, "MemoryMismatch"), (4, "FailsUnderLoad")]
    assert report.problems[0].evidence == (
        "GPU 2: 3 of 1000 memory words read back differ from the pattern written"
    )


@pytest.mark.server  # a fake dcgmi runs as a process
def test_dcgm_and_torch_together_catch_a_uniformly_slow_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    fake_dcgmi(tmp_path, f"cat {FIXTURES / 'v4_r3_pass.json'}")  # DCGM: every test passed
    monkeypatch.setattr(load_test, "_torch_runner", lambda: lambda *_: GpuRun(300, H100, 0, 8))
    both = replace(dcgm_only, engines=("dcgm", "torch"))
    report = run_load_test([], both)
    assert report.engine == "dcgm+torch" and report.gpus == list(range(8))
    assert reasons(report) == [(g, "SlowGpu") for g in range(8)]


@pytest.mark.server  # a fake dcgmi runs as a process
def test_torch_does_not_run_after_dcgm_failed_a_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dcgm_only: LoadTestConfig
) -> None:
    def never(*_: object) -> GpuRun:
        raise AssertionError("CUDA work on a GPU DCGM failed")

    fake_dcgmi(tmp_path, f"cat {V4_FAIL}; exit 226")
    monkeypatch.setattr(load_test, "_torch_runner", lambda: never)
    report = run_load_test([], replace(dcgm_only, engines=("dcgm", "torch")))
    assert report.engine == "dcgm" and (3, "DcgmDiagFailed") in reasons(report)


def test_a_gpu_that_hangs_under_load_stops_the_test_and_says_what_is_untested(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def runner(gpu: int, seconds: float, fraction: float) -> GpuRun:
        if gpu == 1:
            release.wait()  # a CUDA call on a wedged GPU
        return GpuRun(700.0, H100, 0, 8)

    monkeypatch.setattr(load_test, "_torch_runner", lambda: runner)
    try:
        report = run_load_test([0, 1, 2, 3], LoadTestConfig(engines=("torch",), gpu_timeout_s=0.2))
    finally:
        release.set()
    assert reasons(report) == [(1, "FailsUnderLoad"), (None, "DiagnoseCouldNotRun")]
    assert "hung: did not finish within 0.2s" in report.problems[0].evidence
    assert report.problems[1].evidence.endswith("after GPU 1 hung: GPU 2, 3 untested")


def test_built_in_engine_with_no_gpu_could_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load_test, "_torch_runner", lambda: lambda *_: GpuRun(1, H100, 0, 1))
    report = run_load_test([], LoadTestConfig(engines=("torch",)))
    assert reasons(report) == [(None, "DiagnoseCouldNotRun")]


# -- throughput: reference for the model, and peers --------------------------------------------
def test_uniformly_slow_node_is_slow_on_every_gpu() -> None:
    rates = dict.fromkeys(range(8), 380.0)  # all eight H100s power-capped alike
    problems = compare_throughput(rates, dict.fromkeys(range(8), H100), load_references())
    assert [(p.gpu, p.reason.value) for p in problems] == [(g, "SlowGpu") for g in range(8)]
    assert "38% of the H100 SXM reference 989 TFLOP/s" in problems[0].evidence


def test_one_slow_peer_is_the_only_one_named() -> None:
    rates = dict.fromkeys(range(7), 700.0) | {7: 520.0}  # above the floor, behind its peers
    problems = compare_throughput(rates, dict.fromkeys(range(8), H100), load_references())
    assert [(p.gpu, p.reason.value) for p in problems] == [(7, "SlowRank")]
    assert "74% of the median 700 TFLOP/s" in problems[0].evidence


def test_unknown_model_is_compared_with_peers_only_and_says_so() -> None:
    rates = {0: 90.0, 1: 90.0, 2: 40.0}
    problems = compare_throughput(rates, dict.fromkeys(rates, "NVIDIA L4"), load_references())
    assert [(p.gpu, p.reason.value, p.severity) for p in problems] == [
        (None, "NoThroughputReference", Severity.INFO),
        (2, "SlowRank", Severity.CRITICAL),
    ]
    assert (
        problems[0].evidence
        == "no throughput reference for NVIDIA L4: compared with its peers only"
    )


def test_shipped_references_name_their_source_and_an_override_replaces_them(
    tmp_path: Path,
) -> None:
    shipped = load_references()
    assert {r.model for r in shipped.models} >= {"H100 SXM", "H200 SXM", "A100", "B200"}
    assert all(r.source.startswith("https://www.nvidia.com/") for r in shipped.models)
    assert shipped.lookup("NVIDIA H100 PCIe").model == "H100 PCIe"  # type: ignore[union-attr]
    assert shipped.lookup("NVIDIA H200").model == "H200 SXM"  # type: ignore[union-attr]
    own = tmp_path / "ref.yaml"
    own.write_text("floor: 0.9\nmodels:\n  - {model: L4, match: [L4], tflops: 121}\n")
    [slow] = below_reference({0: 100.0}, {0: "NVIDIA L4"}, load_references(own))
    assert slow.reason is LoadReason.SLOW_GPU
    assert REFERENCE_FILE.name == "gpu_reference.yaml"


def test_the_agent_refuses_a_reference_file_it_cannot_read(tmp_path: Path) -> None:
    bad = tmp_path / "ref.yaml"
    bad.write_text("floor: 2\n")
    result = CliRunner().invoke(app, ["agent", "--node", "n", "--gpu-reference", str(bad)])
    assert result.exit_code == 1
    assert f"--gpu-reference {bad}" in result.output
