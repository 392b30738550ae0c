"""remedy's own metrics, declared once: name, description and unit of each. The controller's
workflows record theirs through the SDK's workflow meter (workflows/metrics.py), the node
agent its own (workers/agent.py); tests/test_declared_once.py keeps a name from being written
anywhere else."""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    """What a meter's ``create_counter(*M)`` (gauge, histogram) takes."""

    name: str
    description: str
    unit: str = ""


# Recorded by the controller's workflows (workflows/metrics.py).
REMEDIATIONS = Metric("remedy_remediations", "Remediations finished, by outcome.")
RUNG_DURATION = Metric("remedy_rung_duration", "Time spent in a rung of a ladder, seconds.", "s")
MESSAGES_REFUSED = Metric("remedy_messages_refused", "Messages a ladder refused, by message.")
NODES_CORDONED = Metric("remedy_nodes_cordoned", "Nodes remedy cordoned.")
STORM_BREAKER_TRIPPED = Metric(
    "remedy_storm_breaker_tripped", "1 while the pool's breaker holds cordons and disruptive work."
)
CORDONS_HELD = Metric("remedy_cordons_held", "Ladders whose cordon waits for the breaker to close.")
DISRUPTION_LEASES_HELD = Metric("remedy_disruption_leases_held", "Disruption leases held.")
DISRUPTION_LEASES_WAITING = Metric("remedy_disruption_leases_waiting", "Nodes waiting for a lease.")
LEASES_HELD_BY_WAITING_FOR_HUMAN = Metric(
    "remedy_leases_held_by_waiting_for_human",
    "Disruption shares held by ladders waiting for a person or nodes left for one.",
)
POOL_HELD_BY_PEOPLE = Metric(
    "remedy_pool_held_by_people",
    "1 while every disruption share is held by people and ladders wait behind them.",
)
STORM_BREAKER_TRIPS = Metric(
    "remedy_storm_breaker_trips", "Times a pool's (or the cluster's) breaker tripped."
)
AGENTS_SILENT = Metric("remedy_agents_silent", "Nodes whose agent is silent.")
AGENT_SILENCE_STORM = Metric(
    "remedy_agent_silence_storm",
    "1 while many agents are silent at once: an incident, no AgentSilent ladders.",
)
JOB_FAILURES = Metric("remedy_job_failures", "Failures of guarded jobs, by verdict and action.")
JOB_GOODPUT_RATIO = Metric(
    "remedy_job_goodput_ratio", "Kept training progress over paid GPU-time, per job."
)
POOL_GOODPUT_RATIO = Metric(
    "remedy_pool_goodput_ratio", "Productive GPU-time of guarded jobs over the pool's."
)
JOBS_ENDED = Metric("remedy_jobs_ended", "Guarded jobs that ended, by outcome and cause.")
SLOW_NODE_SUSPICIONS = Metric(
    "remedy_slow_node_suspicions",
    "Slow-node suspicions of guarded jobs, by state reached (suspected, proven, unproven, ...).",
)
ACTIVE_CHECKS = Metric("remedy_active_checks", "Scheduled deep diagnoses of nodes, by result.")
ACTIVE_CHECKS_OVERDUE = Metric(
    "remedy_active_checks_overdue",
    "Nodes past their active check's max age that the last round could not check.",
)
NODES_CLOCK_SKEWED = Metric(
    "remedy_nodes_clock_skewed", "Nodes whose clock is off the controller's."
)
CLOCK_SKEW_LARGEST_SECONDS = Metric(
    "remedy_clock_skew_largest_seconds",
    "The largest node clock skew in the pool, ahead or behind.",
    "s",
)

# Recorded by the node agent (workers/agent.py).
PROBES = Metric("remedy_probes", "Probe rounds, by verdict.")
PROBE_DURATION = Metric("remedy_probe_duration", "How long a probe round took, seconds.", "s")
FINDINGS_REPORTED = Metric(
    "remedy_findings_reported", "Unhealthy findings reported, by check and reason."
)
FINDINGS_FOLDED = Metric(
    "remedy_findings_folded",
    "Repeats of a finding not sent: the node's running ladder already has it.",
)
DEPENDENCY_OK = Metric(
    "remedy_dependency_ok", "1 when a dependency remedy relies on is there, else 0."
)
