"""Every signal, query and update, by the workflow that handles it, with its payload type.

Two workflows may use the same name for different messages (``state``, ``resume``): each is
declared here under its workflow, and tests/test_contract.py checks that each has a handler.
An operator's decision (approve, abort, clear, resume) is an update that answers; the signal of
the same name stays for clients of the release before (SIGNALS_KEPT_UNTIL drops them).
"""

from __future__ import annotations

from typing import Any

from contract.defs import QueryDef, SignalDef, UpdateDef
from contract.names import (
    ACTIVE_CHECK_WORKFLOW,
    ACTIVE_CHECKS_WORKFLOW,
    DISRUPTION_BUDGET_WORKFLOW,
    HARDWARE_RECORD_WORKFLOW,
    JOB_GUARD_WORKFLOW,
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
)
from remedy.attribution import guard
from remedy.attribution.model import PodFailure
from remedy.disruption import budget, budget_messages, quarantine
from remedy.disruption.budget_signals import LeaseAnswer, ReportsTaken, UnhealthyReports
from remedy.ladder import remediation
from remedy.ladder.hardware import HardwareRecordState, IncidentReport, UnblockRequest
from remedy.scan import fabric
from remedy.scan.admission import AdmissionState
from remedy.trust import decisions, person_hold, signing

# -- NodeRemediation: one per node ------------------------------------------------------------
REPORT_FINDING = SignalDef("report_finding", remediation.FindingReport, NODE_REMEDIATION_WORKFLOW)
LEASE_GRANTED = SignalDef("lease_granted", budget.LeaseGrant, NODE_REMEDIATION_WORKFLOW)
# A nudge to a ladder held for a person: read the node's hold again (it takes only the node's).
HOLD_LIFTED = SignalDef("hold_lifted", person_hold.HoldQuery, NODE_REMEDIATION_WORKFLOW)
# A budget's leave to cordon, to a ladder that asked while its breaker was tripped.
CORDON_LEAVE = SignalDef("cordon_leave", quarantine.CordonLeave, NODE_REMEDIATION_WORKFLOW)
APPROVE = SignalDef("approve", decisions.ApproveRequest, NODE_REMEDIATION_WORKFLOW)
CLEAR = SignalDef("clear", decisions.ClearRequest, NODE_REMEDIATION_WORKFLOW)
ABORT = SignalDef("abort", decisions.AbortRequest, NODE_REMEDIATION_WORKFLOW)
# Read the operator keyring anew: what a decision refused with "send it again" asks first.
LOAD_KEYRING = SignalDef("load_keyring", signing.KeyringWanted, NODE_REMEDIATION_WORKFLOW)
REMEDIATION_STATE = QueryDef("state", remediation.RemediationState, NODE_REMEDIATION_WORKFLOW)
# A decision the ladder cannot judge yet (its keyring not read, or read too long ago) is asked
# for again: the caller signals LOAD_KEYRING first (contract.defs.UpdateDef.execute).
APPROVE_RUNG = UpdateDef(
    "approve",
    decisions.ApproveRequest,
    remediation.ApproveResult,
    NODE_REMEDIATION_WORKFLOW,
    ready=LOAD_KEYRING,
)
CLEAR_LADDER = UpdateDef(
    "clear",
    decisions.ClearRequest,
    remediation.StopResult,
    NODE_REMEDIATION_WORKFLOW,
    ready=LOAD_KEYRING,
)
ABORT_LADDER = UpdateDef(
    "abort",
    decisions.AbortRequest,
    remediation.StopResult,
    NODE_REMEDIATION_WORKFLOW,
    ready=LOAD_KEYRING,
)

# -- DisruptionBudget: one per pool -------------------------------------------------------------
LEASE_REQUEST = SignalDef("request", budget.LeaseRequest, DISRUPTION_BUDGET_WORKFLOW)
# A lease asked and answered in one call: granted at once, or not yet (then LEASE_GRANTED, as
# for LEASE_REQUEST). No workflow task, signal or timer in the ladder for a grant at once.
ASK_LEASE = UpdateDef("ask_lease", budget.LeaseRequest, LeaseAnswer, DISRUPTION_BUDGET_WORKFLOW)
LEASE_RELEASE = SignalDef("release", budget.LeaseRelease, DISRUPTION_BUDGET_WORKFLOW)
NODE_UNHEALTHY = SignalDef("node_unhealthy", budget.UnhealthyReport, DISRUPTION_BUDGET_WORKFLOW)
# Several ladders' reports in one call (a storm's): an update, so that a budget of the release
# before (no handler) refuses it and the reports go one by one, as signals, and none is lost.
NODES_UNHEALTHY = UpdateDef(
    "nodes_unhealthy", UnhealthyReports, ReportsTaken, DISRUPTION_BUDGET_WORKFLOW
)
RESUME_POOL = SignalDef("resume", budget_messages.ResumeRequest, DISRUPTION_BUDGET_WORKFLOW)
# A lease holder's ladder begins or ends a wait for a person (the pool is held by people).
HOLDER_WAITS = SignalDef("holder_waits", budget_messages.HumanWait, DISRUPTION_BUDGET_WORKFLOW)
BUDGET_STATE = QueryDef("state", budget.BudgetState, DISRUPTION_BUDGET_WORKFLOW)
CLOSE_BREAKER = UpdateDef(
    "resume",
    budget_messages.ResumeRequest,
    budget_messages.ResumeResult,
    DISRUPTION_BUDGET_WORKFLOW,
)
# An operator ends a node's hold for a person (`remedy release-hold`); LEASE_RELEASE, which
# ladders send, stays the signal it falls back to for a budget from before the update.
RELEASE_HOLD = UpdateDef(
    "release_hold", budget.LeaseRelease, budget_messages.HoldReleased, DISRUPTION_BUDGET_WORKFLOW
)

# -- HardwareRecord: one per GPU serial ---------------------------------------------------------
INCIDENT = SignalDef("incident", IncidentReport, HARDWARE_RECORD_WORKFLOW)
UNBLOCK = SignalDef("unblock", UnblockRequest, HARDWARE_RECORD_WORKFLOW)
HARDWARE_RECORD = QueryDef("record", HardwareRecordState, HARDWARE_RECORD_WORKFLOW)

# -- NodeAdmission: one per new node ------------------------------------------------------------
ADMISSION_STATE = QueryDef("state", AdmissionState, NODE_ADMISSION_WORKFLOW)

# -- ActiveCheck: one node's scheduled check (a lease holder, as a ladder is) ----------------
CHECK_LEASE_GRANTED = SignalDef("lease_granted", budget.LeaseGrant, ACTIVE_CHECK_WORKFLOW)
# Pair tests (workflows/fabric_pairs.py): a check tells its round its diagnose is done, the round
# answers with the pair tests' findings on its node.
PAIR_VERDICT = SignalDef("pair_verdict", fabric.PairVerdict, ACTIVE_CHECK_WORKFLOW)
PAIR_READY = SignalDef("pair_ready", fabric.PairReady, ACTIVE_CHECKS_WORKFLOW)

# -- JobGuard: one per guarded job --------------------------------------------------------------
POD_FAILED = SignalDef("pod_failed", PodFailure, JOB_GUARD_WORKFLOW)
RESUME_JOB = SignalDef("resume", guard.ResumeRequest, JOB_GUARD_WORKFLOW)
JOB_FINISHED = SignalDef("job_finished", guard.JobFinished, JOB_GUARD_WORKFLOW)
JOB_PROGRESS = SignalDef("job_progress", guard.JobProgress, JOB_GUARD_WORKFLOW)
JOB_LEDGER = QueryDef("ledger", guard.JobLedger, JOB_GUARD_WORKFLOW)
GUARD_STATUS = QueryDef("phase", guard.GuardStatus, JOB_GUARD_WORKFLOW)
RELEASE_JOB = UpdateDef("resume", guard.ResumeRequest, guard.ResumeResult, JOB_GUARD_WORKFLOW)

# The release that drops the signals the updates replace (APPROVE, CLEAR, ABORT, RESUME_POOL,
# RESUME_JOB): clients of the release before still send them until then.
SIGNALS_KEPT_UNTIL = "0.2.0"


def all_signals() -> list[SignalDef[Any]]:
    return [d for d in globals().values() if isinstance(d, SignalDef)]


def all_queries() -> list[QueryDef[Any]]:
    return [d for d in globals().values() if isinstance(d, QueryDef)]


def all_updates() -> list[UpdateDef[Any, Any]]:
    return [d for d in globals().values() if isinstance(d, UpdateDef)]
