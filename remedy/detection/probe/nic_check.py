"""The probe's NIC check: RDMA devices and their ports (the ports come through the NicSource
seam, remedy/detection/probe/nics.py), with its terms: as many as the node should have, every
port ACTIVE, at the pool's expected rate, and none slower or narrower than its peers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe.context import CheckContext
from remedy.detection.probe.nics import NicPort

NIC = CheckTerms("nic", "RDMA NICs: count, port state and rate, against peers", probe=True)
NIC_MISSING = NIC.reason("NicMissing", "fewer RDMA devices than the node should have")
PORT_DOWN = NIC.reason("NicPortDown", "an RDMA port is not ACTIVE")
RATE_DEGRADED = NIC.reason("NicRateDegraded", "an RDMA port runs below its expected rate")
BELOW_PEERS = NIC.reason(
    "NicBelowPeers", "an RDMA port runs slower or narrower than its peers on the node"
)
# Reported by the nic_link check, which reads the counters (remedy/detection/probe/nic_link.py).
UNREADABLE = NIC.reason(
    "NicCountersUnreadable", "a port's error counters cannot be read: errors there go unseen"
)
# A peer group's usual value must be what most of it shows, among at least this many ports:
# two ports that differ cannot say which one is slow.
MIN_PEERS = 3


def check_nics(ctx: CheckContext) -> list[Finding]:
    """RDMA NICs: as many as expected, every port ACTIVE, at the expected rate, none below its
    peers."""
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
    below = below_peers(ports)
    for port in ports:
        nic = Component(kind=ComponentKind.NIC, device=port.name)
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
        elif port.name in below:
            out.append(ctx.finding(NIC.check, BELOW_PEERS, Severity.WARNING, below[port.name], nic))
    return out


def below_peers(ports: list[NicPort]) -> dict[str, str]:
    """Each ACTIVE port slower or narrower than most of its peers, with what it shows against
    theirs. Peers are ports of one kind (device model and link layer): a node's 400G compute
    NICs are not compared with its 100G storage NIC."""
    groups: dict[tuple[str, str], list[NicPort]] = {}
    for port in ports:
        if port.state == "ACTIVE":
            groups.setdefault((port.model, port.link_layer), []).append(port)
    found: dict[str, str] = {}
    for peers in groups.values():
        rate = _usual(peers, lambda p: p.rate_gbps)
        width = _usual(peers, lambda p: p.width)
        for port in peers:
            if rate is not None and port.rate_gbps < rate:
                found[port.name] = (
                    f"{port.rate_gbps:g} Gb/s, its {len(peers) - 1} peers {rate:g} Gb/s"
                )
            elif width and port.width and port.width < int(width):
                found[port.name] = f"{port.width}X wide, its {len(peers) - 1} peers {width:g}X"
    return found


def _usual(peers: list[NicPort], value: Callable[[NicPort], float]) -> float | None:
    """The value most of the group shows (None: no majority, or too few to tell)."""
    if len(peers) < MIN_PEERS:
        return None
    common, count = Counter(value(p) for p in peers).most_common(1)[0]
    return common if count * 2 > len(peers) else None
