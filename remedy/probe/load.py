"""What a load test found: the engine that ran it, the GPUs it covered, each problem with the
GPU it blames, and each GPU's throughput. The engines (DCGM diagnostics, torch, cupy) live on
the host side (``adapters/host``); the deep diagnose turns this report into findings."""

from __future__ import annotations

from enum import StrEnum

from remedy.models import Frozen, Severity

LOAD_CHECK = "load"


class LoadReason(StrEnum):
    """The load check's reasons (registered in ``remedy.vocabulary``)."""

    FAILS_UNDER_LOAD = "FailsUnderLoad"  # an error under load (a CUDA error, a crash)
    MEMORY_MISMATCH = "MemoryMismatch"  # memory read back differs from what was written
    SLOW_GPU = "SlowGpu"  # below the reference throughput for its model
    SLOW_RANK = "SlowRank"  # much slower than its peers on the node
    DCGM_DIAG_FAILED = "DcgmDiagFailed"  # a DCGM diagnostic test failed on the GPU
    DCGM_DIAG_WARNING = "DcgmDiagWarning"  # a DCGM diagnostic test warned
    COULD_NOT_RUN = "DiagnoseCouldNotRun"  # no engine, a hang, an answer it could not read
    NO_REFERENCE = "NoThroughputReference"  # unknown model: compared with peers only


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
