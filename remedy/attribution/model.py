"""What is known when a job's pod fails, and the verdict: the platform's fault, the
application's, or unknown — with the evidence that decided it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel

from remedy.core.models import Finding, FreeText, Untrusted


class Verdict(StrEnum):
    PLATFORM = "platform"  # the machine or the cluster: retry the job elsewhere
    APPLICATION = "application"  # the job's own code or configuration: do not retry blindly
    UNKNOWN = "unknown"  # not enough to tell: one retry, then a human


class Termination(BaseModel):
    """The failed container's end, as the pod status tells it."""

    exit_code: int | None = None
    reason: str = ""  # OOMKilled, Error, Evicted, NodeLost, ...
    # The pod's DisruptionTarget condition reason, when the cluster took the pod away:
    # EvictionByEvictionAPI (a drain), DeletionByTaintManager, PreemptionByScheduler,
    # TerminationByKubelet (node shutdown or pressure).
    disruption: str | None = None
    message: FreeText = ""


class XidSeen(BaseModel):
    """An Xid a node raised, with the GPU and, when the kernel log names it, the process."""

    code: int
    gpu: str  # serial or UUID: the same physical GPU across jobs
    node: str
    at: datetime
    pid: int | None = None
    process: Annotated[str | None, Untrusted()] = None  # as the kernel log names it
    job: str | None = None  # the job the process belonged to, when known
    action: str | None = None  # NVIDIA's action as the line said it (Finding.nvidia_action)


class RemediationSeen(BaseModel):
    """A remedy ladder on the failed pod's node around the failure."""

    node: str
    runbook: str
    cause: str  # platform | application (the runbook's)
    started_at: datetime
    ended_at: datetime | None = None  # None: still running
    outcome: str = ""


class PodFailure(BaseModel):
    job: str
    pod: str
    node: str
    failed_at: datetime
    termination: Termination
    log_tail: FreeText = ""  # the last lines of the container's log
    node_gone: bool = False  # the node object no longer exists
    findings: list[Finding] = []  # remedy's findings on the job's nodes around the failure
    remediations: list[RemediationSeen] = []  # on the job's nodes around the failure
    xids: list[XidSeen] = []  # on the job's nodes around the failure
    xid_history: list[XidSeen] = []  # application-class Xids on these GPUs, any job, past weeks


class Attribution(BaseModel):
    verdict: Verdict
    rule: str  # the rule that decided
    evidence: list[str]
    blame: str | None = None  # the node at fault, for the guard to put in remediation
