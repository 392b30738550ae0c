"""remedy's own Prometheus metrics, recorded from workflows through the SDK's workflow metric
meter: the same endpoint as the SDK's runtime metrics, and nothing recorded again when a
workflow replays. Labels stay low-cardinality (pool, runbook, action; never the node)."""

from __future__ import annotations

from temporalio import workflow


def remediation_finished(pool: str, runbook: str, outcome: str) -> None:
    workflow.metric_meter().create_counter(
        "remedy_remediations", "Remediations finished, by outcome."
    ).add(1, {"pool": pool, "runbook": runbook, "outcome": outcome})


def rung_finished(pool: str, action: str, result: str, seconds: float) -> None:
    """Time in each rung (the action, its settle and verification), by how it ended."""
    workflow.metric_meter().create_histogram_float(
        "remedy_rung_duration", "Time spent in a rung of a ladder, seconds.", "s"
    ).record(seconds, {"pool": pool, "action": action, "result": result})


def message_refused(pool: str, message: str) -> None:
    """A message a ladder did not take: a report that did not prove who sent it, a grant or
    leave that did not answer its request, an operator's signal refused (workflows/door.py)."""
    workflow.metric_meter().create_counter(
        "remedy_messages_refused", "Messages a ladder refused, by message."
    ).add(1, {"pool": pool, "message": message})


def node_cordoned(pool: str) -> None:
    workflow.metric_meter().create_counter("remedy_nodes_cordoned", "Nodes remedy cordoned.").add(
        1, {"pool": pool}
    )


def pool_budget(pool: str, tripped: bool, leases: int, waiting: int, held: int = 0) -> None:
    """``pool``: a pool, or ``_cluster`` for the cluster-wide breaker."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(
        "remedy_storm_breaker_tripped",
        "1 while the pool's breaker holds cordons and disruptive work.",
    ).set(int(tripped), labels)
    meter.create_gauge(
        "remedy_cordons_held", "Ladders whose cordon waits for the breaker to close."
    ).set(held, labels)
    meter.create_gauge("remedy_disruption_leases_held", "Disruption leases held.").set(
        leases, labels
    )
    meter.create_gauge("remedy_disruption_leases_waiting", "Nodes waiting for a lease.").set(
        waiting, labels
    )


def held_by_people(pool: str, shares: int, seized: bool) -> None:
    """Shares of the pool's budget only a person can free (ladders holding a lease while they
    wait for an approval, nodes left cordoned for a person), and whether they are all of them
    with ladders waiting behind (remedy/held_by_people.py)."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(
        "remedy_leases_held_by_waiting_for_human",
        "Disruption shares held by ladders waiting for a person or nodes left for one.",
    ).set(shares, labels)
    meter.create_gauge(
        "remedy_pool_held_by_people",
        "1 while every disruption share is held by people and ladders wait behind them.",
    ).set(int(seized), labels)


def breaker_tripped(pool: str) -> None:
    workflow.metric_meter().create_counter(
        "remedy_storm_breaker_trips", "Times a pool's (or the cluster's) breaker tripped."
    ).add(1, {"pool": pool})


def agents_silent(pool: str, silent: int, storm: bool) -> None:
    """Per pool (``_cluster``: the fleet): agents silent now, and 1 while they are a storm
    (no AgentSilent ladders)."""
    meter, labels = workflow.metric_meter(), {"pool": pool}
    meter.create_gauge("remedy_agents_silent", "Nodes whose agent is silent.").set(silent, labels)
    meter.create_gauge(
        "remedy_agent_silence_storm",
        "1 while many agents are silent at once: an incident, no AgentSilent ladders.",
    ).set(int(storm), labels)


def job_failure(verdict: str, action: str) -> None:
    """A guarded job's failure (its lead pod), by verdict and what the guard did."""
    workflow.metric_meter().create_counter(
        "remedy_job_failures", "Failures of guarded jobs, by verdict and action."
    ).add(1, {"verdict": verdict, "action": action})


def job_goodput(pool: str, job: str, ratio: float) -> None:
    """A guarded job's productive share of its own GPU-time (remedy/goodput.py)."""
    workflow.metric_meter().create_gauge_float(
        "remedy_job_goodput_ratio", "Kept training progress over paid GPU-time, per job."
    ).set(ratio, {"pool": pool or "unknown", "job": job})


def pool_goodput(pool: str, ratio: float) -> None:
    """Guarded jobs' productive GPU-time over the pool's GPUs in the last day."""
    workflow.metric_meter().create_gauge_float(
        "remedy_pool_goodput_ratio", "Productive GPU-time of guarded jobs over the pool's."
    ).set(ratio, {"pool": pool})


def job_ended(outcome: str, cause: str) -> None:
    """A guarded job's end: succeeded, failed (by the verdict that ended it) or deleted."""
    workflow.metric_meter().create_counter(
        "remedy_jobs_ended", "Guarded jobs that ended, by outcome and cause."
    ).add(1, {"outcome": outcome, "cause": cause or "none"})


def active_check(pool: str, result: str) -> None:
    """One node's scheduled deep diagnose, by result (passed, failed, deferred, skipped)."""
    workflow.metric_meter().create_counter(
        "remedy_active_checks", "Scheduled deep diagnoses of nodes, by result."
    ).add(1, {"pool": pool, "result": result})


def active_checks_overdue(pool: str, nodes: int) -> None:
    workflow.metric_meter().create_gauge(
        "remedy_active_checks_overdue",
        "Nodes past their active check's max age that the last round could not check.",
    ).set(nodes, {"pool": pool})


def clock_skew(pool: str, skewed: int, largest_s: int) -> None:
    """Nodes whose clock is off the controller's beyond remedy.liveness.SKEW_TOLERANCE, and
    the largest skew known in the pool, either way (a gauge cannot go negative). Reported,
    never trusted: liveness is judged on the controller's clock."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(
        "remedy_nodes_clock_skewed", "Nodes whose clock is off the controller's."
    ).set(skewed, labels)
    meter.create_gauge(
        "remedy_clock_skew_largest_seconds",
        "The largest node clock skew in the pool, ahead or behind.",
        "s",
    ).set(abs(largest_s), labels)
