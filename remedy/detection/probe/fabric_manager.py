"""The probe's Fabric Manager check, with its terms and its seam: the service's state as the
node's service manager reports it (``adapters.host.services`` asks systemd).

NVIDIA Fabric Manager configures the NVSwitch fabric and monitors it; on an NVSwitch system
(HGX/DGX H100, H200) the GPUs cannot use NVLink without it, and by default
(``ABORT_CUDA_JOBS_ON_FM_EXIT=1``) its exit aborts the running CUDA jobs. So the check runs
only where a GPU reports a fabric (a GPU without one answers "not supported": no finding), and
there it is a finding when the service is not running, or when its state cannot be read.

A service the node does not have (systemd's ``LoadState=not-found``) is not a finding: the GPU
operator runs Fabric Manager inside its driver container, out of systemd's sight; the nvlink
check's fabric state (``FabricNotReady``) is the witness there.
"""

from __future__ import annotations

from remedy.core.models import Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe.context import CheckContext, gpus_of
from remedy.detection.probe.nvlink import on_fabric
from remedy.detection.probe.services import RUNNING, ServiceUnreadable

FABRIC_MANAGER = CheckTerms(
    "fabric_manager", "the NVIDIA Fabric Manager service on NVSwitch systems", probe=True
)
FABRIC_MANAGER_DOWN = FABRIC_MANAGER.reason(
    "FabricManagerDown", "Fabric Manager is not running on a node whose GPUs need it"
)
FABRIC_MANAGER_UNKNOWN = FABRIC_MANAGER.reason(
    "FabricManagerUnknown", "Fabric Manager's state cannot be read (fail closed)"
)


def check_fabric_manager(ctx: CheckContext) -> list[Finding]:
    assert ctx.fabric_manager is not None
    if not any(on_fabric(ctx, handle) for handle, _ in gpus_of(ctx)):
        return []  # no NVSwitch fabric: nothing needs Fabric Manager
    try:
        state = ctx.fabric_manager.state()
    except ServiceUnreadable as exc:
        return [
            ctx.finding(
                FABRIC_MANAGER.check,
                FABRIC_MANAGER_UNKNOWN,
                Severity.WARNING,
                f"cannot read Fabric Manager's state on an NVSwitch system: {exc}",
            )
        ]
    if not state.installed or state.active in RUNNING or state.starting:
        return []
    return [
        ctx.finding(
            FABRIC_MANAGER.check,
            FABRIC_MANAGER_DOWN,
            Severity.CRITICAL,
            f"Fabric Manager is {state} on an NVSwitch system",
        )
    ]
