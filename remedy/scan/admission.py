"""Node admission: a new node takes work only after passing the deep diagnose twice, some time
apart (a marginal GPU often passes once), and only if none of its GPUs is blocklisted."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from remedy.core.models import Component, NodeRef, ProbeReport
from remedy.detection.probe.diagnose import passed
from remedy.runbook.schema import Runbook
from remedy.scan.fabric import FabricPolicy

ADMISSION_FAILED = "AdmissionFailed"  # the finding reason the replace runbook matches


class AdmissionPolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    passes: int = Field(default=2, ge=1)
    gap: timedelta = timedelta(minutes=10)  # between diagnoses
    diagnose_timeout: timedelta = timedelta(minutes=30)
    fabric: FabricPolicy = FabricPolicy()  # after the last diagnose passed: none by default


class AdmissionPhase(StrEnum):
    CHECKING_RECORD = "checking_hardware_record"
    DIAGNOSING = "diagnosing"
    WAITING_GAP = "waiting_between_diagnoses"
    ADMITTED = "admitted"
    REJECTED = "rejected"


class AdmissionInput(BaseModel):
    node: NodeRef
    node_task_queue: str
    node_pickup_timeout: timedelta = timedelta(minutes=2)
    policy: AdmissionPolicy = AdmissionPolicy()
    # The runbook a rejected node goes to (its replace rung); None: hold for a human.
    failure_runbook: Runbook | None = None


class AdmissionStep(BaseModel):
    """Input of the cluster-side admission activities (hold, admit, reject)."""

    node: NodeRef
    serials: list[str] = []
    reason: str = ""


class DiagnoseRun(BaseModel):
    at: datetime
    healthy: bool
    detail: str


class AdmissionState(BaseModel):
    node: NodeRef
    phase: AdmissionPhase = AdmissionPhase.CHECKING_RECORD
    gpus: list[Component] = []
    diagnoses: list[DiagnoseRun] = []
    reason: str = ""
    remediation: str | None = None  # the workflow id a rejected node was handed to

    @property
    def serials(self) -> list[str]:
        return [g.serial for g in self.gpus if g.serial]


class AdmissionResult(BaseModel):
    node: str
    admitted: bool
    reason: str
    serials: list[str]
    diagnoses: list[DiagnoseRun]


def diagnose_detail(report: ProbeReport) -> str:
    if report.healthy:
        return passed(report)
    bad = [f"{f.headline()}: {f.evidence}" for f in report.findings if f.unhealthy]
    return "; ".join(bad) or "no check could run"


def failing_serials(report: ProbeReport) -> list[str]:
    """The GPUs an unhealthy report blames (node-wide failures blame none)."""
    return sorted(
        {f.component.serial for f in report.findings if f.unhealthy and f.component.serial}
    )
