"""What a load test found: the engine that ran it, the GPUs it covered, each problem with the
GPU it blames, and each GPU's throughput. The engines (DCGM diagnostics, torch, cupy) live on
the host side (``adapters/host``); the deep diagnose turns this report into findings."""

from __future__ import annotations

from enum import StrEnum

from remedy.core.models import Frozen, Severity
from remedy.detection.check_terms import CheckTerms


class LoadReason(StrEnum):
    """The load check's reasons (their meanings: ``LOAD``, below)."""

    FAILS_UNDER_LOAD = "FailsUnderLoad"
    MEMORY_MISMATCH = "MemoryMismatch"
    SLOW_GPU = "SlowGpu"
    SLOW_RANK = "SlowRank"
    DCGM_DIAG_FAILED = "DcgmDiagFailed"
    DCGM_DIAG_WARNING = "DcgmDiagWarning"
    COULD_NOT_RUN = "DiagnoseCouldNotRun"  # no engine, a hang, an answer it could not read
    NO_REFERENCE = "NoThroughputReference"


LOAD = CheckTerms(
    "load",
    "the deep diagnose's load test (DCGM diagnostics, or torch/cupy)",
    {
        LoadReason.FAILS_UNDER_LOAD: "a GPU raised an error under sustained load",
        LoadReason.MEMORY_MISMATCH: "GPU memory read back differs from the pattern written",
        LoadReason.SLOW_GPU: "a GPU runs below the reference throughput for its model",
        LoadReason.SLOW_RANK: "a GPU runs much slower than its peers on the node",
        LoadReason.DCGM_DIAG_FAILED: "a DCGM diagnostic test failed",
        LoadReason.DCGM_DIAG_WARNING: "a DCGM diagnostic test warned",
        LoadReason.COULD_NOT_RUN: "the load test could not run on the node or a GPU (fail closed)",
        LoadReason.NO_REFERENCE: "no reference for the GPU model: peers compared only",
    },
)
LOAD_CHECK = LOAD.check


class LoadProblem(Frozen):
    gpu: int | None = None  # None: the node (or the test itself)
    reason: LoadReason
    evidence: str
    severity: Severity = Severity.CRITICAL


class LoadReport(Frozen):
    engine: str = ""  # "dcgm", "torch", "cupy", "sim"; empty when none could run
    gpus: list[int] = []  # the GPUs it covered
    problems: list[LoadProblem] = []
    throughput: dict[int, float] = {}  # dense 16-bit matmul TFLOP/s per GPU, when measured
    models: dict[int, str] = {}  # each GPU's model name, when the engine knows it

    @property
    def ran(self) -> bool:
        return not any(p.reason is LoadReason.COULD_NOT_RUN for p in self.problems)


def could_not_run(why: str, engine: str = "") -> LoadReport:
    """Fail closed: a load test that could not run is a problem on the node, never a pass."""
    return LoadReport(
        engine=engine, problems=[LoadProblem(reason=LoadReason.COULD_NOT_RUN, evidence=why)]
    )
