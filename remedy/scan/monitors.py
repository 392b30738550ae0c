"""Conditions that the monitors a fleet already runs set on its nodes, taken as remedy's faults.

node-problem-detector (AKS ships GPU plugins: ``XIDErrors``, ``NVLinkStatusInactive``,
``GPUMissing``, ...), the EKS node monitoring agent (``AcceleratedHardwareReady=False``, reason
``NvidiaXID79Error``), Meta's GCM checks run as NPD plugins: each writes Kubernetes node
conditions. An operator's table says which of them remedy takes and as which of its own faults
(a reason in remedy's vocabulary), so the fleet scan starts the ladder of that fault, and the
rung is verified by remedy's own check for it (remedy.ladder.verification): a condition remedy
has no check for cannot be mapped, and nothing another monitor says is trusted as a recovery.

A rule names the condition type, the status that means a problem (NPD's problem conditions
are "True"; the EKS agent's ``*Ready`` ones are "False"), the reasons it covers (none: any),
and remedy's reason, or that the Xid code is read from the condition's reason or message (a
condition that names no code is not taken: remedy's own kernel-log check reads the same Xids).
A monitor that stopped writing must not keep starting ladders from what it said last: the scan
drops a condition whose heartbeat is ``FRESH_FOR`` older than the node agent's newest (both on
the node's clock; remedy.scan.fleet.current_problems). The shipped examples are in
``examples/monitors/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from remedy.core.models import FreeText
from remedy.core.yaml_source import load_model
from remedy.detection.conditions import PROBLEM_CONDITIONS, NodeCondition
from remedy.detection.vocabulary import known_reason

# "NvidiaXID79Error", "XID 79 detected", "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen ..."
_XID_CODE = re.compile(r"xid\s*(?:\([^)]{0,80}\)\s*:)?\s*(\d{1,4})", re.IGNORECASE)
MAX_RULES = 200
# NPD rewrites an unchanged condition every 5 minutes (its exporter's heartbeat period): three
# rewrites missed, the monitor is gone.
FRESH_FOR = timedelta(minutes=15)
ReasonName = Annotated[str, AfterValidator(known_reason)]  # read from files only: always checked


class MonitorRule(BaseModel):
    """One condition of another monitor, and the fault remedy takes it as."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(min_length=1, max_length=316)  # a condition type (a qualified name)
    problem_when: Literal["True", "False"] = "True"
    reasons: list[str] = []  # the condition's reasons this rule covers; empty: any
    reason: ReasonName | None = None  # remedy's reason for it
    xid_from: Literal["reason", "message"] | None = None  # or: the Xid code, read from there
    source: FreeText = ""  # where the monitor documents the condition

    @model_validator(mode="after")
    def _says_what_fault(self) -> MonitorRule:
        if (self.reason is None) == (self.xid_from is None):
            raise ValueError("give one of reason (remedy's reason) or xid_from (reason|message)")
        if self.type in PROBLEM_CONDITIONS:
            raise ValueError(f"{self.type} is remedy's own condition, taken already")
        return self

    def covers(self, condition: NodeCondition) -> bool:
        return (
            condition.type == self.type
            and condition.status == self.problem_when
            and (not self.reasons or condition.reason in self.reasons)
        )

    def fault(self, condition: NodeCondition) -> str | None:
        """remedy's reason for the condition (None: an Xid rule whose condition names no code)."""
        if self.reason is not None:
            return self.reason
        said = condition.reason if self.xid_from == "reason" else condition.message
        code = _XID_CODE.search(said)
        return f"Xid{int(code[1])}" if code else None


class MonitorTable(BaseModel):
    """The rules, first match wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[MonitorRule] = Field(default=[], max_length=MAX_RULES)

    @property
    def types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.rules)

    def taken(self, conditions: Iterable[NodeCondition]) -> list[NodeCondition]:
        """The conditions that say a problem the table maps, each as a problem condition of
        remedy's: status "True", remedy's reason (what the scan's finding
        and the runbook match read), the monitor's words kept in the message."""
        out = []
        for condition in conditions:
            rule = next((r for r in self.rules if r.covers(condition)), None)
            fault = rule.fault(condition) if rule is not None else None
            if fault is None:
                continue
            said = f"{condition.type}={condition.status} {condition.reason}: {condition.message}"
            update = {"status": "True", "reason": fault, "message": said[:1024]}
            out.append(condition.model_copy(update=update))
        return out


def load_monitor_tables(paths: Iterable[str | Path]) -> MonitorTable:
    """The rules of every file, in order (YamlFileError: every problem, with file and line;
    nothing is taken from a table that does not load)."""
    rules: list[MonitorRule] = []
    for path in paths:
        rules.extend(load_model(Path(path), MonitorTable).rules)
    return MonitorTable(rules=rules)
