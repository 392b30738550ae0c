"""Host-local actions (node agent worker, on the node's own task queue): probe, diagnose,
reset GPU, reboot, and what the node can do (its capabilities). The simulated fleet serves them
for every simulated node.

Every action the table (``remedy.core.actions``) runs on the node is a method here named as the
action, registered from the table. One that is a single command on the node is a method of
three lines: ``return self._command(req, "systemctl", "restart", "some-service")`` — the host
runs it at most once per key, and the simulation clears the faults its fault table says the
action clears (adapters/sim/faults.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.errors import temporal_errors
from activities.table import action_activities
from contract import activities as act
from remedy.acting.capabilities import Capabilities, capabilities_from
from remedy.core.actions import Action, Where
from remedy.core.models import ActionRequest, ActionResult, ProbeReport, ProbeRequest
from remedy.detection.host import NodeHost
from remedy.detection.probe import probe_node
from remedy.detection.probe.diagnose import deep_diagnose, passed
from remedy.redaction import Redactor, redacted


class NodeActivities:
    """What a probe or a diagnose returns is redacted here (kernel lines, DCGM's and the load
    test's output): the node's text enters the ladder's or the check's history only so."""

    def __init__(
        self, host_for: Callable[[str], NodeHost], redactor: Redactor | None = None
    ) -> None:
        self._host_for = host_for
        self._redactor = redactor or Redactor()

    def _host(self, name: str) -> NodeHost:
        with temporal_errors():
            return self._host_for(name)

    @act.PROBE.defn
    def probe(self, req: ProbeRequest) -> ProbeReport:
        host = self._host(req.node.name)
        return redacted(probe_node(host.name, host.nvml(), host.probe_config), self._redactor)

    @act.DIAGNOSE.defn
    def diagnose(self, req: ActionRequest) -> ActionResult:
        host = self._host(req.node.name)
        report = redacted(deep_diagnose(host, req.gpu_indices, host.probe_config), self._redactor)
        found = [f for f in report.findings if f.unhealthy]
        problems = [f"{f.reason}: {f.evidence}" for f in found]
        if report.healthy:
            return ActionResult(ok=True, detail=passed(report))
        detail = "; ".join(problems) or "no check could run"
        return ActionResult(ok=False, detail=detail, findings=found if report.checks_run else [])

    @act.DEEP_DIAGNOSE.defn
    def deep_diagnose(self, req: ProbeRequest) -> ProbeReport:
        """The full report of the deep diagnose (admission needs which GPU failed)."""
        host = self._host(req.node.name)
        return redacted(deep_diagnose(host, [], host.probe_config), self._redactor)

    @act.RESET_GPU.defn
    def reset_gpu(self, req: ActionRequest) -> ActionResult:
        host = self._host(req.node.name)
        with temporal_errors():
            detail = host.reset_gpus(req.gpu_indices, req.key)
        return ActionResult(ok=True, detail=detail)

    @act.REBOOT.defn
    def reboot(self, req: ActionRequest) -> ActionResult:
        host = self._host(req.node.name)
        with temporal_errors():
            detail = host.reboot(req.key)
        return ActionResult(ok=True, detail=detail)

    @act.ACTION[Action.RESTART_FABRIC_MANAGER].defn
    def restart_fabric_manager(self, req: ActionRequest) -> ActionResult:
        return self._command(req, "systemctl", "restart", "nvidia-fabricmanager")

    def _command(self, req: ActionRequest, *command: str) -> ActionResult:
        """An action that is one command on the node, run at most once for the request's key."""
        host = self._host(req.node.name)
        with temporal_errors():
            detail = host.run_action(req.action, list(command), req.key)
        return ActionResult(ok=True, detail=detail)

    @act.CAPABILITIES.defn
    def capabilities(self, req: ProbeRequest) -> Capabilities:
        """From the node's dependency checks (the expensive ones as last checked)."""
        host = self._host(req.node.name)
        return capabilities_from(host.dependencies())

    def all(self) -> list[Callable[..., Any]]:
        """The table's node actions and the activities around them."""
        return [
            *action_activities(Where.NODE, self),
            self.probe,
            self.deep_diagnose,
            self.capabilities,
        ]
