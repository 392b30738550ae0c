"""mlx5 and EFA driver errors in the kernel log, read on every probe beside the Xids.

Each pattern is the driver's own printf string (linux drivers/net/ethernet/mellanox/mlx5/core
cmd.c, health.c, events.c; drivers/infiniband/hw/efa/efa_com.c), as NVSentinel's syslog
monitor and gpud's infiniband component match them. A firmware command that timed out, a
device whose health poll failed, an EFA admin queue that stopped answering: the NIC no longer
works for the job (critical). A port module error (a cable error, an overheated optic) is
recorded: the link it takes down is the NIC check's ``NicPortDown``. EFA's ``Failed to process
command DEREG_MR`` after a process ends is expected (AWS Neuron's troubleshooting guide) and is
not matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.xid.lines import MAX_LINE, not_from_the_kernel, timestamp

NIC_DRIVER = CheckTerms("nic_driver", "mlx5 and EFA driver errors in the kernel log")
CMD_TIMEOUT = NIC_DRIVER.reason(
    "Mlx5CommandTimeout", "an mlx5 firmware command timed out: the NIC stopped answering"
)
HEALTH = NIC_DRIVER.reason(
    "Mlx5HealthCompromised", "the mlx5 health poll failed or the NIC reported a fatal error"
)
EFA_TIMEOUT = NIC_DRIVER.reason("EfaAdminTimeout", "the EFA device's admin queue stopped answering")
MODULE_ERROR = NIC_DRIVER.reason(
    "NicModuleError", "a port module (cable or optic) error, e.g. high temperature (recorded)"
)

# The device: ``mlx5_core 0000:03:00.0`` (dev_err) or ``efa 0000:00:06.0 efa_0`` (ibdev_err).
_PCI = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_DEVICE = rf"(?P<driver>mlx5_core|efa)(?: (?P<pci>{_PCI}))?(?: (?P<dev>[\w.-]+))?:"
_PATTERNS: tuple[tuple[re.Pattern[str], str, Severity], ...] = (
    (
        re.compile(_DEVICE + r".*\btimeout\. Will cause a leak of a command resource"),
        CMD_TIMEOUT,
        Severity.CRITICAL,
    ),
    (
        re.compile(_DEVICE + r".*(?:device's health compromised|unrecoverable hardware error)"),
        HEALTH,
        Severity.CRITICAL,
    ),
    (
        re.compile(_DEVICE + r".*Wait for completion \(polling\) timeout"),
        EFA_TIMEOUT,
        Severity.CRITICAL,
    ),
    (
        re.compile(_DEVICE + r".*Port module event\[error\]: (?P<what>.*)$"),
        MODULE_ERROR,
        Severity.INFO,
    ),
)


def nic_log_findings(
    node: str, lines: Iterable[str], not_before: datetime | None, now: datetime
) -> list[Finding]:
    """One finding per matching kernel line, skipping those logged before ``not_before`` (an
    earlier boot) and lines another program wrote."""
    out = []
    for raw in lines:
        line = raw[:MAX_LINE].rstrip("\r\n")
        if not_from_the_kernel(line):
            continue
        for pattern, reason, severity in _PATTERNS:
            match = pattern.search(line)
            if match is None:
                continue
            if match["driver"] == "efa" and reason is not EFA_TIMEOUT:
                continue  # EFA prints none of mlx5's messages; ENA prints EFA's words as ena
            at = timestamp(line)
            if not_before and at and at < not_before:
                break
            out.append(
                Finding(
                    node=node,
                    check=NIC_DRIVER.check,
                    reason=reason,
                    severity=severity,
                    component=Component(
                        kind=ComponentKind.NIC,
                        device=match["dev"] or f"{match['driver']} {match['pci'] or ''}".strip(),
                        pci_bus_id=(match["pci"] or "").lower() or None,
                    ),
                    evidence=line[match.start() :],
                    observed_at=at or now,
                )
            )
            break
    return out
