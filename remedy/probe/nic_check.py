"""The RDMA NIC check: as many NICs as the node should have, every port up, at its rate."""

from __future__ import annotations

from remedy.models import Component, ComponentKind, Finding, Severity
from remedy.probe.checks import CheckContext


def check_nics(ctx: CheckContext) -> list[Finding]:
    """RDMA NICs: as many as expected, every port ACTIVE, at the expected rate."""
    assert ctx.nics is not None
    ports = ctx.nics.ports()
    out = []
    devices = sorted({p.device for p in ports})
    if ctx.expected_nics is not None and len(devices) < ctx.expected_nics:
        out.append(
            ctx.finding(
                "nic",
                "NicMissing",
                Severity.CRITICAL,
                f"{len(devices)} RDMA devices, the node should have {ctx.expected_nics}",
            )
        )
    for port in ports:
        nic = Component(kind=ComponentKind.NIC, device=f"{port.device}/{port.port}")
        if port.state != "ACTIVE":
            out.append(
                ctx.finding(
                    "nic",
                    "NicPortDown",
                    Severity.CRITICAL,
                    f"port state {port.state}, phys {port.phys_state}",
                    nic,
                )
            )
        elif ctx.expected_nic_rate_gbps and port.rate_gbps < ctx.expected_nic_rate_gbps:
            out.append(
                ctx.finding(
                    "nic",
                    "NicRateDegraded",
                    Severity.WARNING,
                    f"{port.rate_gbps:g} Gb/s, expected {ctx.expected_nic_rate_gbps:g} Gb/s",
                    nic,
                )
            )
    return out
