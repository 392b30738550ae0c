"""remedy's own Prometheus metrics, recorded from workflows through the SDK's workflow metric
meter: the same endpoint as the SDK's runtime metrics, and nothing recorded again when a
workflow replays. Labels stay low-cardinality (pool, runbook, action; never the node)."""

from __future__ import annotations

from temporalio import workflow

from contract import metrics as metric


def remediation_finished(pool: str, runbook: str, outcome: str) -> None:
    workflow.metric_meter().create_counter(*metric.REMEDIATIONS).add(
        1, {"pool": pool, "runbook": runbook, "outcome": outcome}
    )


def rung_finished(pool: str, action: str, result: str, seconds: float) -> None:
    """Time in each rung (the action, its settle and verification), by how it ended."""
    workflow.metric_meter().create_histogram_float(*metric.RUNG_DURATION).record(
        seconds, {"pool": pool, "action": action, "result": result}
    )


def message_refused(pool: str, message: str) -> None:
    """A message a ladder did not take: a report that did not prove who sent it, a grant or
    leave that did not answer its request, an operator's signal refused (workflows/door.py)."""
    workflow.metric_meter().create_counter(*metric.MESSAGES_REFUSED).add(
        1, {"pool": pool, "message": message}
    )


def node_cordoned(pool: str) -> None:
    workflow.metric_meter().create_counter(*metric.NODES_CORDONED).add(1, {"pool": pool})


def pool_budget(pool: str, tripped: bool, leases: int, waiting: int, held: int = 0) -> None:
    """``pool``: a pool, or ``_cluster`` for the cluster-wide breaker."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(
        *metric.STORM_BREAKER_TRIPPED,
    ).set(int(tripped), labels)
    meter.create_gauge(*metric.CORDONS_HELD).set(held, labels)
    meter.create_gauge(*metric.DISRUPTION_LEASES_HELD).set(leases, labels)
    meter.create_gauge(*metric.DISRUPTION_LEASES_WAITING).set(waiting, labels)


def held_by_people(pool: str, shares: int, seized: bool) -> None:
    """Shares of the pool's budget only a person can free (ladders holding a lease while they
    wait for an approval, nodes left cordoned for a person), and whether they are all of them
    with ladders waiting behind (remedy/disruption/held_by_people.py)."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(
        *metric.LEASES_HELD_BY_WAITING_FOR_HUMAN,
    ).set(shares, labels)
    meter.create_gauge(
        *metric.POOL_HELD_BY_PEOPLE,
    ).set(int(seized), labels)


def breaker_tripped(pool: str) -> None:
    workflow.metric_meter().create_counter(*metric.STORM_BREAKER_TRIPS).add(1, {"pool": pool})


def agents_silent(pool: str, silent: int, storm: bool) -> None:
    """Per pool (``_cluster``: the fleet): agents silent now, and 1 while they are a storm
    (no AgentSilent ladders)."""
    meter, labels = workflow.metric_meter(), {"pool": pool}
    meter.create_gauge(*metric.AGENTS_SILENT).set(silent, labels)
    meter.create_gauge(
        *metric.AGENT_SILENCE_STORM,
    ).set(int(storm), labels)


def job_failure(verdict: str, action: str) -> None:
    """A guarded job's failure (its lead pod), by verdict and what the guard did."""
    workflow.metric_meter().create_counter(*metric.JOB_FAILURES).add(
        1, {"verdict": verdict, "action": action}
    )


def job_goodput(pool: str, job: str, ratio: float) -> None:
    """A guarded job's productive share of its own GPU-time (remedy/attribution/goodput.py)."""
    workflow.metric_meter().create_gauge_float(*metric.JOB_GOODPUT_RATIO).set(
        ratio, {"pool": pool or "unknown", "job": job}
    )


def pool_goodput(pool: str, ratio: float) -> None:
    """Guarded jobs' productive GPU-time over the pool's GPUs in the last day."""
    workflow.metric_meter().create_gauge_float(*metric.POOL_GOODPUT_RATIO).set(
        ratio, {"pool": pool}
    )


def job_ended(outcome: str, cause: str) -> None:
    """A guarded job's end: succeeded, failed (by the verdict that ended it) or deleted."""
    workflow.metric_meter().create_counter(*metric.JOBS_ENDED).add(
        1, {"outcome": outcome, "cause": cause or "none"}
    )


def slow_node_suspicion(state: str) -> None:
    """A guarded job's slow-node suspicion reached ``state`` (remedy/attribution/suspicions.py)."""
    workflow.metric_meter().create_counter(*metric.SLOW_NODE_SUSPICIONS).add(1, {"state": state})


def active_check(pool: str, result: str) -> None:
    """One node's scheduled deep diagnose, by result (passed, failed, deferred, skipped)."""
    workflow.metric_meter().create_counter(*metric.ACTIVE_CHECKS).add(
        1, {"pool": pool, "result": result}
    )


def active_checks_overdue(pool: str, nodes: int) -> None:
    workflow.metric_meter().create_gauge(
        *metric.ACTIVE_CHECKS_OVERDUE,
    ).set(nodes, {"pool": pool})


def clock_skew(pool: str, skewed: int, largest_s: int) -> None:
    """Nodes whose clock is off the controller's beyond remedy.scan.liveness.SKEW_TOLERANCE, and
    the largest skew known in the pool, either way (a gauge cannot go negative). Reported,
    never trusted: liveness is judged on the controller's clock."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(*metric.NODES_CLOCK_SKEWED).set(skewed, labels)
    meter.create_gauge(
        *metric.CLOCK_SKEW_LARGEST_SECONDS,
    ).set(abs(largest_s), labels)
