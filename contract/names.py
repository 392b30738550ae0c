"""Every name two processes must agree on: task queues, workflow types and workflow ids."""

CONTROLLER_TASK_QUEUE = "remedy-controller"
NODE_REMEDIATION_WORKFLOW = "NodeRemediation"
DISRUPTION_BUDGET_WORKFLOW = "DisruptionBudget"
HARDWARE_RECORD_WORKFLOW = "HardwareRecord"
NODE_ADMISSION_WORKFLOW = "NodeAdmission"
FLEET_SCAN_WORKFLOW = "FleetScan"
JOB_GUARD_WORKFLOW = "JobGuard"
FLEET_SCAN_SCHEDULE = "remedy-fleet-scan"
ACTIVE_CHECKS_WORKFLOW = "ActiveChecks"  # one round over a pool, started by its schedule
ACTIVE_CHECK_WORKFLOW = "ActiveCheck"  # one node's scheduled deep diagnose
GPU_RELEASE_WORKFLOW = "GpuRelease"  # a person returns a quarantined GPU (remedy release-gpu)
HOLD_RELEASE_WORKFLOW = "HoldRelease"  # a person hands a held node back (remedy resume-node)


def node_task_queue(node: str) -> str:
    """The queue the node's own agent polls; a dead node never picks its work up."""
    return f"remedy-node/{node}"


def remediation_workflow_id(node: str) -> str:
    """One remediation per node: the id is the node, so a second report joins the first."""
    return f"node-remediation/{node}"


# The simulated fleet's agents share one queue: one worker plays every simulated node.
SIM_AGENTS_TASK_QUEUE = "remedy-sim-agents"


def budget_task_queue(controller_queue: str) -> str:
    """The pools' budgets run on a queue of their own, polled by a worker of their own in every
    controller: a ladder's first workflow task waits on its budget's answer, and on the ladders'
    queue the budget's task could wait for a slot that those very tasks hold."""
    suffix = "-budgets"
    return controller_queue if controller_queue.endswith(suffix) else controller_queue + suffix


def budget_workflow_id(pool: str) -> str:
    """One disruption budget per node pool."""
    return f"disruption-budget/{pool}"


def hardware_record_workflow_id(serial: str) -> str:
    """One record per physical GPU, wherever it is installed."""
    return f"hardware-record/{serial}"


def admission_workflow_id(node: str) -> str:
    return f"node-admission/{node}"


def fleet_scan_workflow_id(schedule: str = FLEET_SCAN_SCHEDULE) -> str:
    return f"fleet-scan/{schedule}"


def job_guard_workflow_id(namespace: str, job: str) -> str:
    """One guard per job."""
    return f"job-guard/{namespace}/{job}"


def active_checks_schedule_id(pool: str) -> str:
    """One schedule of active checks per pool."""
    return f"remedy-active-checks/{pool}"


def active_checks_workflow_id(pool: str) -> str:
    return f"active-checks/{pool}"


def active_check_workflow_id(node: str) -> str:
    """One check of a node at a time: a round that finds one still running starts none."""
    return f"active-check/{node}"


def hold_release_workflow_id(node: str) -> str:
    """One hand-back of a node at a time; its history records who asked and why."""
    return f"hold-release/{node}"


def gpu_release_workflow_id(node: str, gpu: int) -> str:
    """One release of a GPU at a time; its history records who asked and why."""
    return f"gpu-release/{node}/{gpu}"
