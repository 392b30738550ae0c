"""The deep diagnose's load test, with the engines the node has: DCGM diagnostics when DCGM is
present (dcgmi on PATH, its host engine reachable), and a built-in test with torch or cupy: on
each GPU, hold most of its memory under a written pattern, multiply 16-bit matrices for a
bounded time, read the pattern back, and compare each GPU's throughput with the reference for
its model and with its peers. Both run when both are there (DCGM first; the built-in test only
if DCGM failed nothing). With no engine it reports that it could not run (fail closed).

``engine_status()`` / ``available_engines()`` say what this node has, for `remedy doctor`."""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from adapters.host.dcgm import dcgm_unavailable, run_dcgm_diag
from adapters.host.gpu_memory import ArrayOps, PatternedMemory, verify_held
from remedy.core.models import Severity
from remedy.core.threads import call_with_timeout
from remedy.detection.probe.load import LoadProblem, LoadReason, LoadReport, could_not_run
from remedy.detection.probe.throughput import REFERENCE_FILE, compare_throughput, load_references

ENGINES = ("dcgm", "torch", "cupy")  # the order the deep diagnose prefers them
GPU_IMAGE_HINT = "run the GPU agent image (Dockerfile.gpu), which carries torch"
N = 8192  # matrix side: 2·N³ flops a product, big enough to keep the tensor cores busy


@dataclass(frozen=True)
class LoadTestConfig:
    dcgm_level: int = 2  # `dcgmi diag -r`: 1 quick, 2 medium (~2 min), 3 long, 4 extended
    dcgm_timeout_s: float = 600.0
    seconds_per_gpu: float = 5.0
    memory_fraction: float = 0.8
    gpu_timeout_s: float = 180.0  # one GPU's built-in test, CUDA start-up and pattern included
    references: Path = REFERENCE_FILE
    dcgmi: str = "dcgmi"
    dcgm_host: str = ""  # the host engine's address, e.g. the GPU operator's nvidia-dcgm
    engines: tuple[str, ...] = ENGINES

    @property
    def per_gpu(self) -> tuple[float, float]:
        return self.seconds_per_gpu, self.memory_fraction


@dataclass(frozen=True)
class GpuRun:
    tflops: float
    model: str
    bad_words: int
    words: int


Runner = Callable[[int, float, float], GpuRun]
DEFAULT_LOAD_TEST = LoadTestConfig()


def engine_status(config: LoadTestConfig = DEFAULT_LOAD_TEST) -> dict[str, str | None]:
    """Each engine: None when it can run here, else what is missing."""
    checks: dict[str, Callable[[], str | None]] = {
        "dcgm": lambda: dcgm_unavailable(config.dcgmi, config.dcgm_host),
        "torch": lambda: _missing(_torch_runner, "torch"),
        "cupy": lambda: _missing(_cupy_runner, "cupy"),
    }
    return {name: checks[name]() for name in config.engines}


def available_engines(config: LoadTestConfig = DEFAULT_LOAD_TEST) -> list[str]:
    """The engines that can run here, best first; empty: the deep diagnose cannot run."""
    return [name for name, why in engine_status(config).items() if why is None]


def run_load_test(gpus: list[int], config: LoadTestConfig = DEFAULT_LOAD_TEST) -> LoadReport:
    """DCGM's verdict first; then the built-in test's throughput (against the model's reference
    and the peers, which no DCGM level below 3 measures) where torch or cupy is there too."""
    missing, dcgm = [], None
    if "dcgm" in config.engines:
        why = dcgm_unavailable(config.dcgmi, config.dcgm_host)
        if why is None:
            level, limit = config.dcgm_level, config.dcgm_timeout_s
            dcgm = run_dcgm_diag(gpus, level, limit, config.dcgmi, config.dcgm_host)
            if any(p.severity is Severity.CRITICAL for p in dcgm.problems):
                return dcgm  # unhealthy already; CUDA work on a GPU DCGM failed may hang
        else:
            missing.append(f"DCGM: {why}")
    for name, factory in (("torch", _torch_runner), ("cupy", _cupy_runner)):
        if name not in config.engines:
            continue
        runner = factory()
        if runner is not None:
            built = _built_in(name, runner, gpus or (dcgm.gpus if dcgm else []), config)
            return _together(dcgm, built) if dcgm else built
        missing.append(f"{name}: {_missing(factory, name)}")
    if dcgm is not None:
        unmeasured = LoadProblem(
            reason=LoadReason.NO_REFERENCE,
            severity=Severity.INFO,
            evidence="throughput not compared with a reference (no torch or cupy): DCGM only",
        )
        return dcgm.model_copy(update={"problems": [*dcgm.problems, unmeasured]})
    why = "; ".join(missing)
    return could_not_run(f"no load-test engine on this node ({why}): {GPU_IMAGE_HINT}")


def _together(dcgm: LoadReport, built: LoadReport) -> LoadReport:
    """A DCGM run that failed nothing, and the built-in test's findings and throughput."""
    return LoadReport(
        engine=f"{dcgm.engine}+{built.engine}",
        gpus=sorted({*dcgm.gpus, *built.gpus}),
        problems=[*dcgm.problems, *built.problems],
        throughput=built.throughput,
        models=built.models,
    )


def _built_in(engine: str, runner: Runner, gpus: list[int], config: LoadTestConfig) -> LoadReport:
    if not gpus:
        return could_not_run("no GPU to test: NVML sees none and none are expected", engine)
    problems: list[LoadProblem] = []
    throughput: dict[int, float] = {}
    models: dict[int, str] = {}
    for n, gpu in enumerate(gpus):
        try:
            run = call_with_timeout(
                partial(runner, gpu, *config.per_gpu), config.gpu_timeout_s, "hung: did not finish"
            )
        except Exception as exc:  # noqa: BLE001 - a GPU that throws under load is the finding
            problems.append(
                LoadProblem(
                    gpu=gpu,
                    reason=LoadReason.FAILS_UNDER_LOAD,
                    evidence=f"GPU {gpu}: {type(exc).__name__} under load: {exc}",
                )
            )
            if isinstance(exc, TimeoutError) and gpus[n + 1 :]:
                # A wedged GPU can hold the others' CUDA calls too: stop, say what is untested.
                untested = ", ".join(map(str, gpus[n + 1 :]))
                why = f"the load test stopped after GPU {gpu} hung: GPU {untested} untested"
                problems += could_not_run(why, engine).problems
                break
            continue
        throughput[gpu], models[gpu] = run.tflops, run.model
        if run.bad_words:
            problems.append(
                LoadProblem(
                    gpu=gpu,
                    reason=LoadReason.MEMORY_MISMATCH,
                    evidence=f"GPU {gpu}: {run.bad_words} of {run.words} memory words read back "
                    "differ from the pattern written",
                )
            )
    try:
        refs = load_references(config.references)
    except (OSError, ValueError) as exc:
        return could_not_run(f"cannot read the throughput references {config.references}: {exc}")
    problems += compare_throughput(throughput, models, refs)
    return LoadReport(
        engine=engine, gpus=list(gpus), problems=problems, throughput=throughput, models=models
    )


def _missing(factory: Callable[[], Runner | None], name: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed"
    return None if factory() is not None else f"{name} sees no CUDA GPU"


def _pci_order() -> None:
    # CUDA numbers GPUs fastest-first unless told otherwise; NVML (and the findings) by PCI bus.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def _timed_products(a: Any, b: Any, seconds: float, sync: Callable[[Any], float]) -> float:
    """Multiply for ``seconds``; TFLOP/s. Each product is read back (``sync``): an async CUDA
    error surfaces here, on this GPU, not in a later call."""
    flops, start = 0.0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sync(a @ b)
        flops += 2 * N**3
    return flops / (time.perf_counter() - start) / 1e12


def _torch_runner() -> Runner | None:
    if importlib.util.find_spec("torch") is None:
        return None
    _pci_order()
    import torch

    if not torch.cuda.is_available():
        return None

    def run(gpu: int, seconds: float, fraction: float) -> GpuRun:
        device = torch.device("cuda", gpu)
        a = torch.randn(N, N, device=device, dtype=torch.bfloat16)
        b = torch.randn(N, N, device=device, dtype=torch.bfloat16)
        free, _total = torch.cuda.mem_get_info(device)
        words = int(free * fraction) // 8
        ops = ArrayOps(
            arange=lambda s, e: torch.arange(s, e, dtype=torch.int64, device=device),
            invert=torch.bitwise_not,
            assign=lambda buf, s, e, v: buf[s:e].copy_(v),
            count_ne=lambda buf, s, e, v: int((buf[s:e] != v).sum().item()),
        )
        memory = PatternedMemory(torch.empty(words, dtype=torch.int64, device=device), words, ops)
        tflops, bad = verify_held(
            memory, lambda: _timed_products(a, b, seconds, lambda c: c.sum().item())
        )
        return GpuRun(tflops, torch.cuda.get_device_name(device), bad, words)

    return run


def _cupy_runner() -> Runner | None:
    if importlib.util.find_spec("cupy") is None:
        return None
    _pci_order()
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
    except cupy.cuda.runtime.CUDARuntimeError:
        return None

    def run(gpu: int, seconds: float, fraction: float) -> GpuRun:
        with cupy.cuda.Device(gpu):
            a = cupy.random.rand(N, N, dtype=cupy.float32).astype(cupy.float16)
            b = cupy.random.rand(N, N, dtype=cupy.float32).astype(cupy.float16)
            free, _total = cupy.cuda.runtime.memGetInfo()
            words = int(free * fraction) // 8
            ops = ArrayOps(
                arange=lambda s, e: cupy.arange(s, e, dtype=cupy.int64),
                invert=cupy.invert,
                assign=lambda buf, s, e, v: buf.__setitem__(slice(s, e), v),
                count_ne=lambda buf, s, e, v: int((buf[s:e] != v).sum()),
            )
            memory = PatternedMemory(cupy.empty(words, dtype=cupy.int64), words, ops)
            tflops, bad = verify_held(
                memory, lambda: _timed_products(a, b, seconds, lambda c: float(c.sum()))
            )
            name = cupy.cuda.runtime.getDeviceProperties(gpu)["name"]
            model = name.decode() if isinstance(name, bytes) else str(name)
            return GpuRun(tflops, model, bad, words)

    return run
