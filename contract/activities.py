"""Every activity: its name, what it takes and returns, and which worker serves it.

The ladder's actions come from the action table (``remedy.core.actions``): each ``Action`` is an
activity of the same name taking an ``ActionRequest``, served on the node or by the controller
as the table says. Names are the wire: renaming one breaks running workflows and the recorded
histories (tests/histories), so they never change.
"""

from __future__ import annotations

from typing import Any

from contract.defs import ActivityDef, Queue
from remedy.acting.capabilities import Capabilities
from remedy.acting.gpu_scope import GpuRelease, GpuReleased
from remedy.acting.mig_layout import MigLayout, MigLayoutStep
from remedy.attribution.elastic import JobShape
from remedy.attribution.evidence import FinishedGuards, GuardedFailures, JobFailureReport
from remedy.attribution.guard import (
    Checkpointed,
    CheckpointRequest,
    JobRef,
    NodeBlame,
    RestartRequest,
    StopRequest,
)
from remedy.attribution.job_report import GoodputWatch, JobsGoodput
from remedy.attribution.model import Attribution, PodFailure
from remedy.attribution.suspicions import ProofCheck, ProofSeen
from remedy.core.actions import ACTIONS, Where
from remedy.core.models import (
    Action,
    ActionRequest,
    ActionResult,
    BootRequest,
    ConditionsUpdate,
    CordonResult,
    Done,
    Finding,
    NodeBoot,
    ProbeReport,
    ProbeRequest,
    Started,
)
from remedy.disruption.budget import Holders, LeaseRelease, LeaseWanted, NodeUnhealthy
from remedy.disruption.budget_messages import (
    ClosedHolders,
    HeldCheck,
    HeldNodes,
    HolderCheck,
    PoolHolders,
)
from remedy.disruption.budget_signals import BudgetSignals, LeaseAnswer, Undelivered
from remedy.disruption.quarantine import Alert, BreakerNotice, CordonAsked
from remedy.ladder.hardware import Blocklisted, IncidentReport, SerialsCheck
from remedy.ladder.intake import Admission, MatchedRunbook, RemediationStart, ReportToAdmit
from remedy.ladder.recurrence import PastIncidents
from remedy.ladder.verification import SeenXids, XidsSince
from remedy.scan.active_checks import ActiveCheckPublish, CheckFailure, Workloads
from remedy.scan.admission import AdmissionInput, AdmissionStep
from remedy.scan.fabric import FabricCheck, FabricRun
from remedy.scan.fleet import (
    ConditionStart,
    FindingStart,
    FleetNodes,
    NodeNames,
    OpenWork,
)
from remedy.scan.orphans import OrphanCheck
from remedy.trust.person_hold import HoldLift, HoldNode, HoldQuery, NodeHeld
from remedy.trust.signing import Keyring

CONTROLLER, NODE = Queue.CONTROLLER, Queue.NODE


def _action(action: Action) -> ActivityDef[ActionRequest, ActionResult]:
    queue = NODE if ACTIONS[action].where is Where.NODE else CONTROLLER
    return ActivityDef(action.value, ActionRequest, ActionResult, queue)


# -- the ladder's actions (cordon answers who holds the cordon, so it has its own result) ---
ACTION: dict[Action, ActivityDef[ActionRequest, ActionResult]] = {
    action: _action(action) for action in Action if action is not Action.CORDON
}
CORDON = ActivityDef("cordon", ActionRequest, CordonResult, CONTROLLER)
DIAGNOSE = ACTION[Action.DIAGNOSE]
DRAIN = ACTION[Action.DRAIN]
KILL_JOB = ACTION[Action.KILL_JOB]
RESET_GPU = ACTION[Action.RESET_GPU]
REBOOT = ACTION[Action.REBOOT]
REPLACE = ACTION[Action.REPLACE]
RESTORE = ACTION[Action.RESTORE]

# -- around the actions -----------------------------------------------------------------------
PROBE = ActivityDef("probe", ProbeRequest, ProbeReport, NODE)
DEEP_DIAGNOSE = ActivityDef("deep_diagnose", ProbeRequest, ProbeReport, NODE)
# What the node can do itself (its dependency checks): a rung it cannot perform is skipped.
CAPABILITIES = ActivityDef("capabilities", ProbeRequest, Capabilities, NODE)
RELEASE_GPUS = ActivityDef("release_gpus", ActionRequest, ActionResult, CONTROLLER)
RETURN_GPUS = ActivityDef("return_gpus", ActionRequest, ActionResult, CONTROLLER)
# A node held for a person after an abort (remedy.trust.person_hold): marked by the ladder that
# aborted, read by a ladder it holds, lifted by `remedy resume-node`.
HOLD_NODE = ActivityDef("hold_node", HoldNode, NodeHeld, CONTROLLER)
READ_HOLD = ActivityDef("read_hold", HoldQuery, NodeHeld, CONTROLLER)
LIFT_HOLD = ActivityDef("lift_hold", HoldLift, NodeHeld, CONTROLLER)
# A person returns a GPU a finished ladder left quarantined (`remedy release-gpu`).
RELEASE_GPU = ActivityDef("release_gpu", GpuRelease, GpuReleased, CONTROLLER)
BOOT_ID = ActivityDef("boot_id", BootRequest, NodeBoot, CONTROLLER)
CONFIRM_REBOOT = ActivityDef("confirm_reboot", BootRequest, ActionResult, CONTROLLER)
# A MIG node's layout around a reset or a reboot (remedy/acting/mig_layout.py): marked pending
# before,
# put back if the action did not run, waited for after.
ASK_MIG_LAYOUT = ActivityDef("ask_mig_layout", MigLayoutStep, MigLayout, CONTROLLER)
KEEP_MIG_LAYOUT = ActivityDef[MigLayoutStep, None](
    "keep_mig_layout", MigLayoutStep, None, CONTROLLER
)
MIG_LAYOUT_RESTORED = ActivityDef("mig_layout_restored", MigLayoutStep, ActionResult, CONTROLLER)
PUBLISH_CONDITIONS = ActivityDef[ConditionsUpdate, None](
    "publish_conditions", ConditionsUpdate, None, CONTROLLER
)
# The Xids the node's agent kept (NVML events and the kernel log): a rung's quiet watch.
XIDS_SINCE = ActivityDef("xids_since", XidsSince, SeenXids, CONTROLLER)

# -- the disruption budget and the hardware record ----------------------------------------------
# Urgent: each is a hop of a lease (or of leave to cordon) that waits for none of the ladders.
# Since LEASE_ANSWERED it answers whether the budget granted the lease at once (a ladder from
# before got nothing back: None, not yet).
REQUEST_LEASE = ActivityDef("request_lease", LeaseWanted, LeaseAnswer, CONTROLLER, urgent=True)
# The lease given back; both, since LOCAL_LEASE_CALLS, local activities of the ladder's task
# (workflows.disruption_lease): no task of their own, no workflow task for their answer.
RELEASE_LEASE = ActivityDef[LeaseRelease, None]("release_lease", LeaseRelease, None, CONTROLLER)
REPORT_UNHEALTHY = ActivityDef[NodeUnhealthy, None](
    "report_unhealthy", NodeUnhealthy, None, CONTROLLER
)
# The report that also asks the pool's (and the cluster's) breaker for leave to cordon.
ASK_TO_CORDON = ActivityDef("ask_to_cordon", NodeUnhealthy, CordonAsked, CONTROLLER, urgent=True)
# A budget's breaker, published where a cordon reads it cheaply (remedy.scan.cluster.BreakerBoard).
PUBLISH_BREAKER = ActivityDef[BreakerNotice, None](
    "publish_breaker", BreakerNotice, None, CONTROLLER
)
# An Event for people: a breaker tripped, a silence storm began or ended.
ALERT = ActivityDef[Alert, None]("alert", Alert, None, CONTROLLER)
# A budget's grants and leave to cordon, signalled side by side (remedy.disruption.budget_signals).
DELIVER_BUDGET_SIGNALS = ActivityDef(
    "deliver_budget_signals", BudgetSignals, Undelivered, CONTROLLER, urgent=True
)
CLOSED_WORKFLOWS = ActivityDef("closed_workflows", HolderCheck, ClosedHolders, CONTROLLER)
LEASE_HOLDERS = ActivityDef("lease_holders", PoolHolders, Holders, CONTROLLER)
HELD_NODES = ActivityDef("held_nodes", HeldCheck, HeldNodes, CONTROLLER)
RECORD_INCIDENTS = ActivityDef[IncidentReport, None](
    "record_incidents", IncidentReport, None, CONTROLLER
)
BLOCKED_SERIALS = ActivityDef("blocked_serials", SerialsCheck, Blocklisted, CONTROLLER)
PAST_INCIDENTS = ActivityDef("past_incidents", SerialsCheck, PastIncidents, CONTROLLER)

# The operators whose signed decisions a ladder takes (remedy.trust.signing): the controller's, read
# by an activity so that it is recorded in the history and a replay sees the same keys.
OPERATOR_KEYRING = ActivityDef[None, Keyring]("operator_keyring", None, Keyring, CONTROLLER)
# The door (remedy.ladder.intake): who sent a report, and the controller's runbook of the name it
# asks.
ADMIT_REPORT = ActivityDef("admit_report", ReportToAdmit, Admission, CONTROLLER, urgent=True)

# -- admission ------------------------------------------------------------------------------
HOLD_FOR_ADMISSION = ActivityDef[AdmissionStep, None](
    "hold_for_admission", AdmissionStep, None, CONTROLLER
)
ADMIT = ActivityDef[AdmissionStep, None]("admit", AdmissionStep, None, CONTROLLER)
REJECT = ActivityDef[AdmissionStep, None]("reject", AdmissionStep, None, CONTROLLER)

# -- starting other workflows (a workflow can signal another but not start it) ----------------
START_REMEDIATION = ActivityDef("start_remediation", RemediationStart, Started, CONTROLLER)
REMEDIATE_CONDITION = ActivityDef("remediate_condition", ConditionStart, Started, CONTROLLER)
REMEDIATE_FINDING = ActivityDef("remediate_finding", FindingStart, Started, CONTROLLER)
# The runbook a running ladder takes next, for a fault its verification probe found elsewhere.
MATCH_RUNBOOK = ActivityDef("match_runbook", Finding, MatchedRunbook, CONTROLLER)
ADOPT_ORPHANS = ActivityDef("adopt_orphaned_cordons", OrphanCheck, NodeNames, CONTROLLER)
START_ADMISSION = ActivityDef("start_admission", AdmissionInput, Started, CONTROLLER)

# -- the fleet scan ---------------------------------------------------------------------------
FLEET_NODES = ActivityDef[None, FleetNodes]("fleet_nodes", None, FleetNodes, CONTROLLER)
OPEN_WORK = ActivityDef[None, OpenWork]("open_work", None, OpenWork, CONTROLLER)
GUARDED_JOB_FAILURES = ActivityDef[None, GuardedFailures](
    "guarded_job_failures", None, GuardedFailures, CONTROLLER
)
REPORT_JOB_FAILURE = ActivityDef("report_job_failure", JobFailureReport, Started, CONTROLLER)
END_FINISHED_GUARDS = ActivityDef[None, FinishedGuards](
    "end_finished_guards", None, FinishedGuards, CONTROLLER
)
# Each guarded job's goodput and its pool's, handed to the job's guard (started if none runs).
JOB_GOODPUT = ActivityDef("job_goodput", GoodputWatch, JobsGoodput, CONTROLLER)

# -- active checks on a schedule ------------------------------------------------------------
NODE_WORKLOADS = ActivityDef("node_workloads", NodeNames, Workloads, CONTROLLER)
PUBLISH_ACTIVE_CHECK = ActivityDef[ActiveCheckPublish, None](
    "publish_active_check", ActiveCheckPublish, None, CONTROLLER
)
REPORT_CHECK_FAILURE = ActivityDef("report_check_failure", CheckFailure, Started, CONTROLLER)
# Fabric tests as Kubernetes Jobs (remedy/scan/fabric.py): made, polled, removed once passed.
START_FABRIC_TEST = ActivityDef("start_fabric_test", FabricRun, FabricRun, CONTROLLER)
FABRIC_TEST_CHECK = ActivityDef("fabric_test_check", FabricRun, FabricCheck, CONTROLLER)
REMOVE_FABRIC_TEST = ActivityDef[FabricRun, None]("remove_fabric_test", FabricRun, None, CONTROLLER)

# -- the job guard ----------------------------------------------------------------------------
ATTRIBUTE_FAILURE = ActivityDef("attribute_failure", PodFailure, Attribution, CONTROLLER)
RESTART_JOB = ActivityDef("restart_job", RestartRequest, Done, CONTROLLER)
STOP_JOB = ActivityDef("stop_job", StopRequest, Done, CONTROLLER)
REMEDIATE_BLAMED_NODE = ActivityDef("remediate_blamed_node", NodeBlame, Started, CONTROLLER)
JOB_SHAPE = ActivityDef("job_shape", JobRef, JobShape, CONTROLLER)  # elastic restarts
CHECKPOINT_JOB = ActivityDef("checkpoint_job", CheckpointRequest, Checkpointed, CONTROLLER)
# How the proof of a slow-node suspicion goes (the node's ladder's word).
LADDER_PROOF = ActivityDef("ladder_proof", ProofCheck, ProofSeen, CONTROLLER)


def all_activities() -> list[ActivityDef[Any, Any]]:
    """Every activity declared here, each once (what the registration test walks)."""
    declared = [*ACTION.values(), *(d for d in globals().values() if isinstance(d, ActivityDef))]
    return list({d.name: d for d in declared}.values())
