"""Run the checks with a timeout each. Fail closed: a check that hangs, raises or cannot run
becomes an unhealthy finding, and a probe that ran nothing is never healthy."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pynvml

from remedy.gpu import NvmlApi
from remedy.models import Finding, ProbeReport, Severity
from remedy.probe.checks import CHECKS, CheckContext


@dataclass(frozen=True)
class ProbeConfig:
    expected_gpus: int | None = None
    check_timeout_s: float = 5.0


def _utcnow() -> datetime:
    return datetime.now(UTC)


def probe_node(node: str, nvml: NvmlApi, config: ProbeConfig = ProbeConfig(),
               now: Callable[[], datetime] = _utcnow) -> ProbeReport:
    started, t0 = now(), time.perf_counter()
    ctx = CheckContext(node=node, nvml=nvml, expected_gpus=config.expected_gpus, now=now)
    findings: list[Finding] = []
    checks_run: list[str] = []
    try:
        nvml.nvmlInit()
    except pynvml.NVMLError as exc:
        findings.append(ctx.finding("probe", "NvmlUnavailable", Severity.CRITICAL,
                                    f"nvmlInit failed: {exc}"))
        return ProbeReport(node=node, checks_run=[], findings=findings, started_at=started,
                           duration_s=time.perf_counter() - t0)
    # A hung NVML call cannot be interrupted; the worker thread is abandoned, not awaited.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(CHECKS),
                                                 thread_name_prefix="probe")
    try:
        futures = {name: pool.submit(check, ctx) for name, check in CHECKS.items()}
        deadline = time.perf_counter() + config.check_timeout_s
        for name, future in futures.items():
            try:
                findings.extend(future.result(timeout=max(0.0, deadline - time.perf_counter())))
                checks_run.append(name)
            except concurrent.futures.TimeoutError:
                findings.append(ctx.finding("probe", "CheckTimedOut", Severity.CRITICAL,
                                            f"check {name} did not answer within "
                                            f"{config.check_timeout_s:g}s"))
            except Exception as exc:  # noqa: BLE001 - any failure of a check is a finding
                findings.append(ctx.finding("probe", "CheckFailed", Severity.CRITICAL,
                                            f"check {name} failed: {type(exc).__name__}: {exc}"))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            nvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    return ProbeReport(node=node, checks_run=checks_run, findings=findings, started_at=started,
                       duration_s=time.perf_counter() - t0)
