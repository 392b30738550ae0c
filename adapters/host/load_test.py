"""Sustained load on each GPU: allocate most of its memory and multiply matrices for a bounded
time, with torch or cupy when the node has one. Finds GPUs that answer queries but fail under
load, and the slow rank: one GPU much slower than its peers stalls a lockstep job."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable

from remedy.probe.slow_ranks import slow_ranks

NO_LIBRARY = "no compute library (torch or cupy) on the node: the load test could not run"


def run_load_test(
    gpus: list[int], seconds_per_gpu: float = 5.0, memory_fraction: float = 0.8
) -> list[str]:
    """One line per problem; empty when every GPU held up. Never silently passes: without a
    compute library it reports that it could not run."""
    runner = _torch_runner() or _cupy_runner()
    if runner is None:
        return [NO_LIBRARY]
    problems, throughput = [], {}
    for gpu in gpus:
        try:
            throughput[gpu] = runner(gpu, seconds_per_gpu, memory_fraction)
        except Exception as exc:  # noqa: BLE001 - a GPU that throws under load is the finding
            problems.append(f"GPU {gpu}: {type(exc).__name__} under load: {exc}")
    return problems + slow_ranks(throughput)


Runner = Callable[[int, float, float], float]


def _torch_runner() -> Runner | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    def run(gpu: int, seconds: float, fraction: float) -> float:
        device = torch.device("cuda", gpu)
        free, _total = torch.cuda.mem_get_info(device)
        ballast = torch.empty(int(free * fraction) // 2, dtype=torch.uint8, device=device)
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        flops, start = 0.0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            (a @ b).sum().item()  # .item() syncs: an async CUDA error surfaces here
            flops += 2 * 8192**3
        del ballast
        return flops / (time.perf_counter() - start) / 1e12

    return run if torch.cuda.is_available() else None


def _cupy_runner() -> Runner | None:
    if importlib.util.find_spec("cupy") is None:
        return None
    import cupy

    def run(gpu: int, seconds: float, fraction: float) -> float:
        with cupy.cuda.Device(gpu):
            free, _total = cupy.cuda.runtime.memGetInfo()
            ballast = cupy.empty(int(free * fraction) // 2, dtype=cupy.uint8)
            a = cupy.random.rand(8192, 8192, dtype=cupy.float32)
            b = cupy.random.rand(8192, 8192, dtype=cupy.float32)
            flops, start = 0.0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                float((a @ b).sum())
                flops += 2 * 8192**3
            del ballast
            return flops / (time.perf_counter() - start) / 1e12

    return run
