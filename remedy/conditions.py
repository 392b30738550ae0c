"""Probe reports as Kubernetes-style node conditions, node-problem-detector style.

Polarity: status "True" means a problem (like NPD's KernelDeadlock). ``last_transition_time``
changes only when the status or the reason changes: resetting it on every write would break
"unhealthy for N minutes" logic downstream and flood the API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from remedy.models import ProbeReport

GPU_PROBLEM = "GpuProblem"
GPU_NETWORK_PROBLEM = "GpuNetworkProblem"
GPU_ACTIVE_CHECK = "GpuActiveCheck"  # the scheduled deep diagnose (remedy/active_checks.py)
# Conditions whose fault a workflow hands to the node's ladder itself: the scan must not start
# a second ladder from one (a failed active check stays True until the node's next check).
HANDED_OVER = frozenset({GPU_ACTIVE_CHECK})
NETWORK_CHECKS = frozenset({"nic"})
MAX_MESSAGE = 1024


class NodeCondition(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    last_heartbeat_time: datetime
    last_transition_time: datetime


def is_problem(condition: NodeCondition) -> bool:
    """A condition the fleet scan turns into a ladder when no ladder runs."""
    return condition.status == "True" and condition.type not in HANDED_OVER


def conditions_from(
    report: ProbeReport, previous: list[NodeCondition], now: datetime
) -> list[NodeCondition]:
    before = {c.type: c for c in previous}
    network_ran = "nic" in report.checks_run or any(
        f.check in NETWORK_CHECKS for f in report.findings
    )
    out = []
    for kind, network, healthy_reason in (
        (GPU_PROBLEM, False, "NoGpuProblem"),
        (GPU_NETWORK_PROBLEM, True, "NoGpuNetworkProblem"),
    ):
        if network and not network_ran:
            continue  # this node does not check NICs: publish nothing rather than a guess
        bad = [f for f in report.findings if f.unhealthy and (f.check in NETWORK_CHECKS) == network]
        if bad:
            status: Literal["True", "False"] = "True"
            reason = bad[0].reason
            message = "; ".join(f"{f.headline()}: {f.evidence}" for f in bad)[:MAX_MESSAGE]
        else:
            status, reason, message = "False", healthy_reason, "all checks passed"
        old = before.get(kind)
        unchanged = old is not None and (old.status, old.reason) == (status, reason)
        out.append(
            NodeCondition(
                type=kind,
                status=status,
                reason=reason,
                message=message,
                last_heartbeat_time=now,
                last_transition_time=old.last_transition_time if old and unchanged else now,
            )
        )
    return out
