"""The probe's NIC check: RDMA devices and their ports (the ports come through the NicSource
seam, remedy/detection/probe/nics.py), with its terms."""

from __future__ import annotations

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe.context import CheckContext

NIC = CheckTerms("nic", "RDMA NICs: count, port state and rate", probe=True)
NIC_MISSING = NIC.reason("NicMissing", "fewer RDMA devices than the node should have")
PORT_DOWN = NIC.reason("NicPortDown", "an RDMA port is not ACTIVE")
RATE_DEGRADED = NIC.reason("NicRateDegraded", "an RDMA port runs below its expected rate")


def check_nics(ctx: CheckContext) -> list[Finding]:
    """RDMA NICs: as many as expected, every port ACTIVE, at the expected rate."""
    assert ctx.nics is not None
    ports = ctx.nics.ports()
    out = []
    devices = sorted({p.device for p in ports})
    if ctx.expected_nics is not None and len(devices) < ctx.expected_nics:
        out.append(
            ctx.finding(
                NIC.check,
                NIC_MISSING,
                Severity.CRITICAL,
                f"{len(devices)} RDMA devices, the node should have {ctx.expected_nics}",
            )
        )
    for port in ports:
        nic = Component(kind=ComponentKind.NIC, device=f"{port.device}/{port.port}")
        if port.state != "ACTIVE":
            out.append(
                ctx.finding(
                    NIC.check,
                    PORT_DOWN,
                    Severity.CRITICAL,
                    f"port state {port.state}, phys {port.phys_state}",
                    nic,
                )
            )
        elif ctx.expected_nic_rate_gbps and port.rate_gbps < ctx.expected_nic_rate_gbps:
            out.append(
                ctx.finding(
                    NIC.check,
                    RATE_DEGRADED,
                    Severity.WARNING,
                    f"{port.rate_gbps:g} Gb/s, expected {ctx.expected_nic_rate_gbps:g} Gb/s",
                    nic,
                )
            )
    return out
