"""A GPU in MIG mode is reset only when every one of its instances is idle: a reset destroys
every GPU instance, so a process on any of them loses its work (and nvidia-smi's own refusal
covers processes it sees, not a promise remedy relies on). Asked of NVML on the node, per MIG
device: its GPU instance id and the compute processes running on it."""

from __future__ import annotations

from typing import Any

from remedy.core.errors import ActionFailed, TransientError
from remedy.detection import gpu as nv
from remedy.detection.gpu import NvmlApi

# NVML answers for a GPU or a driver without MIG: nothing to wait for.
_NO_MIG = (nv.NVML_ERROR_NOT_SUPPORTED, nv.NVML_ERROR_FUNCTION_NOT_FOUND)


def busy_instances(nvml: NvmlApi, gpu: int) -> list[str]:
    """The MIG instances of ``gpu`` with processes on them, e.g. ``GPU-I:02 (pid 4242)``;
    empty when the GPU is not in MIG mode or every instance is idle. Any other NVML error is
    raised: then nobody knows, and the caller must not reset."""
    handle = nvml.nvmlDeviceGetHandleByIndex(gpu)
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError as err:
        if err.value in _NO_MIG:
            return []
        raise
    if current != nv.NVML_DEVICE_MIG_ENABLE:
        return []
    busy = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            device = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except nv.NVMLError as err:
            if err.value == nv.NVML_ERROR_NOT_FOUND:
                continue  # an empty slot
            raise
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(device)
        if processes:
            instance = nvml.nvmlDeviceGetGpuInstanceId(device)
            busy.append(f"GPU-I:{instance:02d} ({_pids(processes)})")
    return busy


def refuse_unless_idle(nvml: NvmlApi, gpus: list[int], node: str) -> None:
    """Raise unless every MIG instance of ``gpus`` is idle: TransientError while processes run
    (the drain just evicted their pods: they may still be leaving, so a retry may pass),
    ActionFailed when NVML cannot tell (fail closed: never reset what may be serving)."""
    try:
        nvml.nvmlInit()
    except nv.NVMLError as err:
        raise ActionFailed(_unknown(node, gpus, err)) from None
    try:
        for gpu in gpus:
            try:
                busy = busy_instances(nvml, gpu)
            except nv.NVMLError as err:
                raise ActionFailed(_unknown(node, [gpu], err)) from None
            if busy:
                raise TransientError(
                    f"MIG instances of GPU {gpu} on {node} are in use: {', '.join(busy)}; a "
                    "reset needs every instance idle (drain or kill their pods first)"
                )
    finally:
        nvml.nvmlShutdown()


def _unknown(node: str, gpus: list[int], err: Exception) -> str:
    which = ", ".join(map(str, gpus))
    return (
        f"not resetting GPU {which} on {node}: NVML cannot say whether its MIG instances are "
        f"idle ({err})"
    )


def _pids(processes: list[Any]) -> str:
    return "pid " + ", ".join(str(p.pid) for p in processes)
