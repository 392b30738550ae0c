"""The reasons of the Kubernetes Events remedy writes, declared once: what people filter on
(``kubectl get events --field-selector reason=RemedyCordoned``) and alert rules match. The
adapters write them (adapters/kubernetes/), the breaker's alerts name them
(remedy/disruption/quarantine.py); tests/test_declared_once.py keeps a literal from being written
anywhere else."""

from __future__ import annotations

from enum import StrEnum


class EventReason(StrEnum):
    # a node's ladder (adapters/kubernetes/control.py, drain.py, replace.py, gpu_*.py)
    CORDONED = "RemedyCordoned"
    RESTORED = "RemedyRestored"
    DRAINED = "RemedyDrained"
    KILLED_JOB = "RemedyKilledJob"
    CHECKPOINT_REQUESTED = "RemedyCheckpointRequested"
    REPLACED = "RemedyReplaced"
    GPU_QUARANTINED = "RemedyGpuQuarantined"
    GPU_RETURNED = "RemedyGpuReturned"
    GPUS_RELEASED = "RemedyGpusReleased"  # the GPU operator's pods, for a reset
    GPUS_RETURNED = "RemedyGpusReturned"
    MIG_LAYOUT = "RemedyMigLayout"
    OTHER_REPAIRER = "RemedySteppedBack"  # another repairer acts on the node: remedy does not
    # a new node's admission (adapters/kubernetes/admission.py)
    ADMITTED = "RemedyAdmitted"
    ADMISSION_REJECTED = "RemedyAdmissionRejected"
    # a guarded job (adapters/kubernetes/jobs.py)
    RESTART_REQUESTED = "RemedyRestartRequested"
    RESTARTED = "RemedyRestarted"
    JOB_STOPPED = "RemedyJobStopped"
    # what a dry run would have done, on a node or a job
    DRY_RUN = "RemedyDryRun"
    # the breakers' alerts (remedy/disruption/quarantine.py)
    QUARANTINE = "RemedyQuarantine"  # the breaker tripped: cordons wait
    QUARANTINE_OVER = "RemedyQuarantineOver"
    AGENTS_SILENT = "RemedyAgentsSilent"  # a silence storm: no AgentSilent ladders
    AGENTS_SILENT_OVER = "RemedyAgentsSilentOver"
