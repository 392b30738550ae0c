"""remedy's own metrics, declared once: name, description, unit, Prometheus type and labels of
each. The controller's workflows record theirs through the SDK's workflow meter
(workflows/metrics.py), the node agent its own (workers/agent.py); tests/test_declared_once.py
keeps a name from being written anywhere else, tests/test_metric_labels.py holds each recording
to its kind and labels, and docs/metrics.md is generated from here (workers/metrics_doc.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    kind: Kind
    labels: tuple[str, ...] = ()
    unit: str = ""
    recorded: str = ""  # who records it, and when (docs/metrics.md)

    @property
    def args(self) -> tuple[str, str, str]:
        """What a meter's ``create_counter(*M.args)`` (gauge, histogram) takes."""
        return self.name, self.description, self.unit


# Recorded by the controller's workflows (workflows/metrics.py).
REMEDIATIONS = Metric(
    "remedy_remediations",
    "Remediations finished, by outcome.",
    "counter",
    ("pool", "runbook", "outcome"),
    recorded="NodeRemediation, when a ladder ends",
)
RUNG_DURATION = Metric(
    "remedy_rung_duration",
    "Time spent in a rung of a ladder, seconds.",
    "histogram",
    ("pool", "action", "result"),
    "s",
    recorded=(
        "NodeRemediation: each rung (action, settle, verification) and the cordon / restore "
        "around them"
    ),
)
MESSAGES_REFUSED = Metric(
    "remedy_messages_refused",
    "Messages a ladder refused, by message.",
    "counter",
    ("pool", "message"),
    recorded=(
        "NodeRemediation, each message its door refused: a report that did not prove its sender "
        "or asked for a runbook the controller lacks, a grant or leave without its request's "
        "token, a start's state, a decision signal"
    ),
)
NODES_CORDONED = Metric(
    "remedy_nodes_cordoned",
    "Nodes remedy cordoned.",
    "counter",
    ("pool",),
    recorded="NodeRemediation, each cordon remedy set",
)
STORM_BREAKER_TRIPPED = Metric(
    "remedy_storm_breaker_tripped",
    "1 while the pool's breaker holds cordons and disruptive work.",
    "gauge",
    ("pool",),
    recorded="DisruptionBudget, at each change (pool `_cluster`: the cluster's breaker)",
)
CORDONS_HELD = Metric(
    "remedy_cordons_held",
    "Ladders whose cordon waits for the breaker to close.",
    "gauge",
    ("pool",),
    recorded="DisruptionBudget, at each change",
)
DISRUPTION_LEASES_HELD = Metric(
    "remedy_disruption_leases_held",
    "Disruption leases held.",
    "gauge",
    ("pool",),
    recorded="DisruptionBudget, at each change",
)
DISRUPTION_LEASES_WAITING = Metric(
    "remedy_disruption_leases_waiting",
    "Nodes waiting for a lease.",
    "gauge",
    ("pool",),
    recorded="DisruptionBudget, at each change",
)
LEASES_HELD_BY_WAITING_FOR_HUMAN = Metric(
    "remedy_leases_held_by_waiting_for_human",
    "Disruption shares held by ladders waiting for a person or nodes left for one.",
    "gauge",
    ("pool",),
    recorded=(
        "DisruptionBudget: shares only a person can free (ladders holding a lease while they wait"
        " for an approval, nodes left cordoned for a person)"
    ),
)
POOL_HELD_BY_PEOPLE = Metric(
    "remedy_pool_held_by_people",
    "1 while every disruption share is held by people and ladders wait behind them.",
    "gauge",
    ("pool",),
    recorded=(
        "DisruptionBudget: every share held by people and ladders waiting behind them (the pool "
        "is seized)"
    ),
)
STORM_BREAKER_TRIPS = Metric(
    "remedy_storm_breaker_trips",
    "Times a pool's (or the cluster's) breaker tripped.",
    "counter",
    ("pool",),
    recorded="DisruptionBudget, each time its breaker trips",
)
AGENTS_SILENT = Metric(
    "remedy_agents_silent",
    "Nodes whose agent is silent.",
    "gauge",
    ("pool",),
    recorded="FleetScan, every scan (pool `_cluster`: the fleet)",
)
AGENT_SILENCE_STORM = Metric(
    "remedy_agent_silence_storm",
    "1 while many agents are silent at once: an incident, no AgentSilent ladders.",
    "gauge",
    ("pool",),
    recorded="FleetScan, every scan (pool `_cluster`: judged fleet-wide)",
)
JOB_FAILURES = Metric(
    "remedy_job_failures",
    "Failures of guarded jobs, by verdict and action.",
    "counter",
    ("verdict", "action"),
    recorded="JobGuard, once per failure of a guarded job; action `restart`, `stop` or `hold`",
)
JOB_GOODPUT_RATIO = Metric(
    "remedy_job_goodput_ratio",
    "Kept training progress over paid GPU-time, per job.",
    "gauge",
    ("pool", "job"),
    recorded="JobGuard, as the fleet scan hands it the job's figures",
)
POOL_GOODPUT_RATIO = Metric(
    "remedy_pool_goodput_ratio",
    "Productive GPU-time of guarded jobs over the pool's.",
    "gauge",
    ("pool",),
    recorded="FleetScan, with the job watch: over the pool's GPUs in the last day",
)
JOBS_ENDED = Metric(
    "remedy_jobs_ended",
    "Guarded jobs that ended, by outcome and cause.",
    "counter",
    ("outcome", "cause"),
    recorded="JobGuard, once when its job ends: outcome `succeeded`, `failed` or `deleted`",
)
SLOW_NODE_SUSPICIONS = Metric(
    "remedy_slow_node_suspicions",
    "Slow-node suspicions of guarded jobs, by state reached (suspected, proven, unproven, ...).",
    "counter",
    ("state",),
    recorded=(
        "JobGuard, once per slow-node suspicion reaching a state (`suspected`, `application`, "
        "`proving`, `proven`, `unproven`, `expired`)"
    ),
)
ACTIVE_CHECKS = Metric(
    "remedy_active_checks",
    "Scheduled deep diagnoses of nodes, by result.",
    "counter",
    ("pool", "result"),
    recorded=(
        "ActiveCheck, once per node checked (or not): `passed`, `failed`, `deferred`, `skipped`"
    ),
)
ACTIVE_CHECKS_OVERDUE = Metric(
    "remedy_active_checks_overdue",
    "Nodes past their active check's max age that the last round could not check.",
    "gauge",
    ("pool",),
    recorded="ActiveChecks, each round",
)
NODES_CLOCK_SKEWED = Metric(
    "remedy_nodes_clock_skewed",
    "Nodes whose clock is off the controller's.",
    "gauge",
    ("pool",),
    recorded="FleetScan, every scan: more than a minute off",
)
CLOCK_SKEW_LARGEST_SECONDS = Metric(
    "remedy_clock_skew_largest_seconds",
    "The largest node clock skew in the pool, ahead or behind.",
    "gauge",
    ("pool",),
    "s",
    recorded="FleetScan, every scan",
)
FLEET_SCANS = Metric(
    "remedy_fleet_scans",
    "Fleet scans the controller finished: it stops rising while the controller's workers stall.",
    "counter",
    recorded="FleetScan, at the end of each scan",
)
FLEET_NODES = Metric(
    "remedy_fleet_nodes",
    "Nodes by the status the last fleet scan saw.",
    "gauge",
    ("pool", "status"),
    recorded="FleetScan, every scan: every status of every pool, 0 included",
)
LADDERS = Metric(
    "remedy_ladders",
    "Running ladders by phase, as the last fleet scan read them.",
    "gauge",
    ("pool", "phase"),
    recorded=(
        "FleetScan, every scan, from visibility (a ladder with no pool yet: its node's); every "
        "phase, 0 included"
    ),
)
LADDER_PHASE_OLDEST_SECONDS = Metric(
    "remedy_ladder_phase_oldest_seconds",
    "How long the running ladder longest in its phase has been in it (0: none in the phase).",
    "gauge",
    ("pool", "phase"),
    "s",
    recorded="FleetScan, every scan, from the ladders' RemedyPhaseSince",
)
DETECTION_TO_CORDON = Metric(
    "remedy_detection_to_cordon",
    "From the finding that chose the runbook (the agent's clock) to the node's cordon, seconds.",
    "histogram",
    ("pool",),
    "s",
    recorded="NodeRemediation, at each cordon remedy set",
)

# Recorded by the node agent (workers/agent.py).
PROBES = Metric(
    "remedy_probes",
    "Probe rounds, by verdict.",
    "counter",
    ("verdict",),
    recorded="agent, each probe round: verdict `healthy`, `unhealthy`, `failed`",
)
PROBE_DURATION = Metric(
    "remedy_probe_duration",
    "How long a probe round took, seconds.",
    "histogram",
    (),
    "s",
    recorded="agent, each probe round",
)
FINDINGS_REPORTED = Metric(
    "remedy_findings_reported",
    "Unhealthy findings reported, by check and reason.",
    "counter",
    ("check", "reason"),
    recorded=(
        "agent: a finding sent to the node's ladder, once per change (new, back after it cleared,"
        " routed differently); the findings of one fault in one round count each but go as one "
        "signal"
    ),
)
FINDINGS_FOLDED = Metric(
    "remedy_findings_folded",
    "Repeats of a finding not sent: the node's running ladder already has it.",
    "counter",
    ("check", "reason"),
    recorded=(
        "agent: a repeat not sent because the ladder it went to still runs (an Xid the GPU raises"
        " again, a fault that flapped)"
    ),
)
DEPENDENCY_OK = Metric(
    "remedy_dependency_ok",
    "1 when a dependency remedy relies on is there, else 0.",
    "gauge",
    ("dependency",),
    recorded=(
        "agent, every probe: `nvml`, `reset_tool`, `reboot_path`, `load_test`, `kernel_log`, "
        "`nic_config` (`remedy doctor` prints the same checks)"
    ),
)


# The Temporal SDK's own metrics that remedy's alerts and dashboard read: the same endpoint
# serves them (workers/client.py's metrics_runtime). Not remedy's to declare, only to rely on.
SDK_METRICS = (
    Metric(
        "temporal_workflow_completed",
        "Workflow runs completed, by type (the SDK's).",
        "counter",
        ("namespace", "task_queue", "workflow_type"),
        recorded="every worker",
    ),
    Metric(
        "temporal_workflow_task_schedule_to_start_latency",
        "How long workflow tasks waited for a worker to take them, seconds (the SDK's).",
        "histogram",
        ("namespace", "task_queue"),
        "s",
        recorded="every worker: high on remedy-controller, the controller is behind",
    ),
)
# Every sample carries the runtime's global tag (the process's role: controller, agent, demo)
# and the SDK's service_name; what workflows record, the workflow meter's labels too.
# Prometheus adds job and instance on scraping.
GLOBAL_LABELS = ("remedy_role", "service_name")
WORKFLOW_LABELS = ("namespace", "task_queue", "workflow_type")
SCRAPE_LABELS = ("job", "instance")


def exposed(m: Metric) -> tuple[str, ...]:
    """The names Prometheus shows for ``m``: the exporter adds _total to counters, and a
    histogram is its _bucket (by ``le``), _sum and _count series. No unit suffix."""
    if m.kind == "counter":
        return (f"{m.name}_total",)
    if m.kind == "histogram":
        return tuple(f"{m.name}_{part}" for part in ("bucket", "sum", "count"))
    return (m.name,)


def declared() -> list[Metric]:
    """remedy's own metrics, in the order declared."""
    return [m for m in globals().values() if isinstance(m, Metric)]
