"""The probe's NVLink check: each GPU's links, their error counters as rates, and the GPU's
place in the NVSwitch fabric, with the check's terms.

Thresholds and where they come from (docs/runbooks.md lists them):

- CRC errors (flit and data, each): a link at ``CRC_PER_S`` or more per second. DCGM's NVLink
  health watch fails a GPU at that rate (``DCGM_LIMIT_MAX_NVLINK_CRC_ERROR``, 100/s: "CRC
  errors only matter at rates of 100+ per second", dcgm_gpu_hardware_limits.h); a lower rate
  is the noise of a healthy link and is not a finding.
- Replays and recoveries: any increase within the window (``MIN_INCREASE``). DCGM's health
  watch fails a GPU on one (``DCGM_LIMIT_MAX_NVLINK_ERROR``, 1), and Meta's GCM health checks
  (``check-dcgmi nvlink -c nvlink_errors``) fail past a count whose default is 0.
- A link inactive while links of the node are active: a finding (GCM's ``nvlink_status`` fails on
  any link down; AKS's node-problem-detector reports ``NVLinkStatusInactive``). A node whose links
  are all inactive has no NVLink in use; on an NVSwitch system the fabric state says more.
- Fail closed: an active link whose counters cannot be read is a finding.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

from remedy.core.models import Component, Finding, Severity
from remedy.detection import gpu as nv
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe.context import CheckContext, gpus_of, supported
from remedy.detection.probe.rates import CounterWindow, Rate

CRC_PER_S = 100.0
MIN_INCREASE = 1

NVLINK = CheckTerms("nvlink", "NVLink links, their error rates and the NVSwitch fabric", probe=True)
NVLINK_DOWN = NVLINK.reason(
    "NvLinkDown", "an NVLink is inactive while other NVLinks of the node are active"
)
CRC_RATE = NVLINK.reason(
    "NvLinkCrcErrorRate", f"CRC errors on an NVLink at {CRC_PER_S:g}/s or more (DCGM's limit)"
)
REPLAYS = NVLINK.reason("NvLinkReplayErrors", "an NVLink replayed (retransmitted) traffic")
RECOVERIES = NVLINK.reason("NvLinkRecoveryErrors", "an NVLink went through recovery (retrained)")
UNREADABLE = NVLINK.reason(
    "NvLinkCountersUnreadable", "an active NVLink's error counters cannot be read"
)
FABRIC_NOT_READY = NVLINK.reason(
    "FabricNotReady", "the GPU has not joined the NVSwitch fabric, or joining it failed"
)
FABRIC_DEGRADED = NVLINK.reason(
    "FabricDegraded", "the fabric reports the GPU's NVLink bandwidth degraded"
)
FABRIC_UNHEALTHY = NVLINK.reason(
    "FabricUnhealthy",
    "the fabric reports an unhealthy route, an access-timeout recovery or a wrong configuration",
)

# counter, its words, its reason, its severity (a recovery stalls the link's traffic)
_COUNTERS = (
    (nv.NVML_NVLINK_ERROR_DL_CRC_FLIT, "CRC flit", CRC_RATE, Severity.WARNING),
    (nv.NVML_NVLINK_ERROR_DL_CRC_DATA, "CRC data", CRC_RATE, Severity.WARNING),
    (nv.NVML_NVLINK_ERROR_DL_REPLAY, "replay", REPLAYS, Severity.WARNING),
    (nv.NVML_NVLINK_ERROR_DL_RECOVERY, "recovery", RECOVERIES, Severity.CRITICAL),
)
_STATES = {
    nv.NVML_GPU_FABRIC_STATE_NOT_STARTED: "not started",
    nv.NVML_GPU_FABRIC_STATE_IN_PROGRESS: "in progress",
}
_CONFIGURATIONS = {  # NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*
    2: "incorrect system GUID",
    3: "incorrect chassis serial number",
    4: "no partition",
    5: "insufficient NVLinks",
    6: "incompatible GPU firmware",
    7: "invalid location",
    8: "GPU state invalid",
}

_Gpu = tuple[Any, Component, list[int]]  # handle, the GPU, its active links


def check_nvlink(ctx: CheckContext) -> list[Finding]:
    states = [(handle, gpu, _link_states(ctx, handle)) for handle, gpu in gpus_of(ctx)]
    any_active = any(any(links.values()) for _, _, links in states)
    out = []
    for handle, gpu, links in states:
        down = [link for link, active in links.items() if not active]
        if down and any_active:
            out.append(
                ctx.finding(
                    NVLINK.check,
                    NVLINK_DOWN,
                    Severity.CRITICAL,
                    f"NVLink links down: {', '.join(map(str, down))}",
                    gpu,
                )
            )
        out.extend(_fabric(ctx, handle, gpu))
    if ctx.nvlink_window is not None:
        active = [(h, g, [link for link, up in links.items() if up]) for h, g, links in states]
        out.extend(_counters(ctx, ctx.nvlink_window, active))
    return out


def _link_states(ctx: CheckContext, handle: Any) -> dict[int, bool]:
    """Each link the GPU has, active or not."""
    links = {}
    for link in range(nv.NVML_NVLINK_MAX_LINKS):
        try:
            state = ctx.nvml.nvmlDeviceGetNvLinkState(handle, link)
        except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
            continue  # this link does not exist on this GPU
        links[link] = state == nv.NVML_FEATURE_ENABLED
    return links


def _counters(ctx: CheckContext, window: CounterWindow, gpus: list[_Gpu]) -> list[Finding]:
    """Every active link's counters into the window; those with no earlier sample are read
    again after the window's first gap, so an empty window is never taken for a quiet link."""
    unreadable: dict[int, list[str]] = {}
    rates: dict[tuple[int, int, int], Rate | None] = {}

    def sample(n: int, handle: Any, gpu: Component, link: int, counter: int, name: str) -> bool:
        """Read one counter into the window; True when it has no rate yet."""
        try:
            value = ctx.nvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter)
        except nv.NVMLError_GpuIsLost:
            raise
        except nv.NVMLError as exc:
            unreadable.setdefault(n, []).append(f"link {link} {name}: {exc}")
            return False
        key: Hashable = (gpu.uuid or gpu.index, link, counter)
        rate = rates[(n, link, counter)] = window.add(key, int(value), ctx.now())
        return rate is None

    every = [
        (n, handle, gpu, link, counter, name)
        for n, (handle, gpu, links) in enumerate(gpus)
        for link in links
        for counter, name, _, _ in _COUNTERS
    ]
    again = [read for read in every if sample(*read)]
    if again:
        time.sleep(window.first_gap_s)
        for read in again:
            sample(*read)
    return _judged(ctx, gpus, rates, unreadable)


def _judged(
    ctx: CheckContext,
    gpus: list[_Gpu],
    rates: dict[tuple[int, int, int], Rate | None],
    unreadable: dict[int, list[str]],
) -> list[Finding]:
    out = []
    for n, (_, gpu, links) in enumerate(gpus):
        if n in unreadable:
            evidence = "; ".join(unreadable[n])
            out.append(ctx.finding(NVLINK.check, UNREADABLE, Severity.CRITICAL, evidence, gpu))
        for reason in dict.fromkeys(r for _, _, r, _ in _COUNTERS):
            over = [
                f"link {link} {name} {rate}"
                for link in links
                for counter, name, r, _ in _COUNTERS
                if r == reason and (rate := rates.get((n, link, counter))) and _over(reason, rate)
            ]
            if over:
                severity = next(s for _, _, r, s in _COUNTERS if r == reason)
                out.append(ctx.finding(NVLINK.check, reason, severity, "; ".join(over), gpu))
    return out


def _over(reason: str, rate: Rate) -> bool:
    if reason == CRC_RATE:
        return rate.per_second >= CRC_PER_S
    return rate.increase >= MIN_INCREASE


def on_fabric(ctx: CheckContext, handle: Any) -> nv.GpuFabricInfo | None:
    """The GPU's fabric info; None where it has no NVSwitch fabric."""
    info: nv.GpuFabricInfo | None = supported(lambda: ctx.nvml.gpu_fabric_info(handle))
    if info is None or info.state == nv.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
        return None
    return info


def _fabric(ctx: CheckContext, handle: Any, gpu: Component) -> list[Finding]:
    """On NVSwitch systems the GPU must have joined the fabric (Fabric Manager up), and the
    fabric must not report it degraded or unhealthy (the health mask, where the driver has it)."""
    info = on_fabric(ctx, handle)
    if info is None:
        return []
    if info.state != nv.NVML_GPU_FABRIC_STATE_COMPLETED:
        state = _STATES.get(info.state, str(info.state))
        why = f"GPU fabric registration {state}, not completed"
        return [ctx.finding(NVLINK.check, FABRIC_NOT_READY, Severity.CRITICAL, why, gpu)]
    if info.status != nv.NVML_SUCCESS:
        why = f"GPU fabric registration completed with NVML error {info.status}"
        return [ctx.finding(NVLINK.check, FABRIC_NOT_READY, Severity.CRITICAL, why, gpu)]
    out = []
    health = info.health_mask
    degraded = info.health(
        nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW,
        nv.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW,
    )
    if degraded == nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE:
        why = f"fabric health mask 0x{health:x}: NVLink bandwidth degraded"
        out.append(ctx.finding(NVLINK.check, FABRIC_DEGRADED, Severity.WARNING, why, gpu))
    problems = _unhealthy(info)
    if problems:
        why = f"fabric health mask 0x{health:x}: {', '.join(problems)}"
        out.append(ctx.finding(NVLINK.check, FABRIC_UNHEALTHY, Severity.CRITICAL, why, gpu))
    return out


def _unhealthy(info: nv.GpuFabricInfo) -> list[str]:
    problems = []
    if (
        info.health(
            nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY,
            nv.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ROUTE_UNHEALTHY,
        )
        == nv.NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_TRUE
    ):
        problems.append("route unhealthy")
    if (
        info.health(
            nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY,
            nv.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_ACCESS_TIMEOUT_RECOVERY,
        )
        == nv.NVML_GPU_FABRIC_HEALTH_MASK_ACCESS_TIMEOUT_RECOVERY_TRUE
    ):
        problems.append("access timeout recovery")
    configuration = info.health(
        nv.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION,
        nv.NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION,
    )
    if configuration not in (
        nv.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NOT_SUPPORTED,
        nv.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE,
    ):
        problems.append(_CONFIGURATIONS.get(configuration, f"configuration {configuration}"))
    return problems
