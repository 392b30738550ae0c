"""Probe reports as Kubernetes-style node conditions, node-problem-detector style, and the
agent's own readiness.

Polarity: status "True" means a problem (like NPD's KernelDeadlock) for the problem conditions;
``RemedyReady`` is the other way round, like the kubelet's Ready: "True" when every dependency
remedy relies on is there. Only problem conditions start a ladder (``is_problem``).
``last_transition_time`` changes only when the status or the reason changes: resetting it on
every write would break "unhealthy for N minutes" logic downstream and flood the API.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from remedy.acting.capabilities import Capabilities
from remedy.core.models import FreeText, ProbeReport
from remedy.detection.probe.nic_check import NIC
from remedy.detection.probe.nic_link import NIC_LINK
from remedy.detection.probe.nic_log import NIC_DRIVER

GPU_PROBLEM = "GpuProblem"
GPU_NETWORK_PROBLEM = "GpuNetworkProblem"
PROBLEM_CONDITIONS = (GPU_PROBLEM, GPU_NETWORK_PROBLEM)
REMEDY_READY = "RemedyReady"
# What the node's agent writes every round: their heartbeat is the agent's (remedy.scan.liveness).
AGENT_CONDITIONS = (*PROBLEM_CONDITIONS, REMEDY_READY)
GPU_ACTIVE_CHECK = "GpuActiveCheck"  # the scheduled deep diagnose (remedy/scan/active_checks.py)
# The NIC checks' findings are GpuNetworkProblem's; every other's GpuProblem's.
NETWORK_CHECKS = frozenset({NIC.check, NIC_LINK.check, NIC_DRIVER.check})
MAX_MESSAGE = 1024


class NodeCondition(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: FreeText  # another writer's (node-problem-detector) may quote the kernel
    last_heartbeat_time: datetime
    last_transition_time: datetime


def conditions_from(
    report: ProbeReport, previous: list[NodeCondition], now: datetime
) -> list[NodeCondition]:
    before = {c.type: c for c in previous}
    network_ran = NIC.check in report.checks_run or any(
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
        out.append(_condition(kind, status, reason, message, before.get(kind), now))
    return out


def ready_condition(
    capabilities: Capabilities, previous: list[NodeCondition], now: datetime
) -> NodeCondition:
    """``RemedyReady``: "True" when every dependency is there, else "False" naming each one
    missing and why (what the node cannot do follows from it)."""
    old = next((c for c in previous if c.type == REMEDY_READY), None)
    if capabilities.ready:
        return _condition(
            REMEDY_READY, "True", "DependenciesPresent", capabilities.summary(), old, now
        )
    message = capabilities.summary()[:MAX_MESSAGE]
    return _condition(REMEDY_READY, "False", "DependenciesMissing", message, old, now)


def recovered_conditions(report: ProbeReport, on_node: list[NodeCondition]) -> list[NodeCondition]:
    """What the controller writes after a verified recovery (a clean re-probe): the agent's
    conditions as ``report`` says, on the agent's clock. Each keeps the heartbeat the agent
    last wrote on it, so the controller's write is no sign of the agent's life (the fleet scan
    judges liveness by that value: remedy.scan.liveness), and a transition is dated by that
    heartbeat rather than by the controller's clock. Only what changes is written, and only
    on conditions the agent wrote: nothing else is the agent's to correct.

    >>> from datetime import UTC
    >>> beat = datetime(2026, 11, 1, tzinfo=UTC)  # the agent's clock, maybe far from ours
    >>> bad = NodeCondition(type=GPU_PROBLEM, status="True", reason="Xid48", message="x",
    ...     last_heartbeat_time=beat, last_transition_time=beat)
    >>> clean = ProbeReport(node="n", checks_run=["gpu"], started_at=beat)
    >>> [fixed] = recovered_conditions(clean, [bad])
    >>> fixed.status, fixed.last_heartbeat_time == fixed.last_transition_time == beat
    ('False', True)
    >>> recovered_conditions(clean, [fixed])
    []
    """
    before = {c.type: c for c in on_node}
    out = []
    # Any time will do: both of a written condition's times are the agent's (below).
    for condition in conditions_from(report, on_node, datetime.fromtimestamp(0, UTC)):
        old = before.get(condition.type)
        if old is None or said(old) == said(condition):
            continue
        moved = (old.status, old.reason) != (condition.status, condition.reason)
        beat = old.last_heartbeat_time
        out.append(
            condition.model_copy(
                update={
                    "last_heartbeat_time": beat,
                    "last_transition_time": beat if moved else old.last_transition_time,
                }
            )
        )
    return out


def said(condition: NodeCondition) -> tuple[str, str, str]:
    """What a condition says, apart from when (a write that changes none of it is a heartbeat)."""
    return condition.status, condition.reason, condition.message


def is_problem(condition: NodeCondition) -> bool:
    """A condition that says the node is unhealthy (what the fleet scan remediates). Not a
    failed active check (GpuActiveCheck): its check hands the fault to the ladder itself, and
    the condition stays True until the node's next check."""
    return condition.type in PROBLEM_CONDITIONS and condition.status == "True"


def _condition(
    kind: str,
    status: Literal["True", "False"],
    reason: str,
    message: str,
    old: NodeCondition | None,
    now: datetime,
) -> NodeCondition:
    unchanged = old is not None and (old.status, old.reason) == (status, reason)
    return NodeCondition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_heartbeat_time=now,
        last_transition_time=old.last_transition_time if old and unchanged else now,
    )
