"""remedy's own Prometheus metrics, recorded from workflows through the SDK's workflow metric
meter: the same endpoint as the SDK's runtime metrics, and nothing recorded again when a
workflow replays. Labels stay low-cardinality (pool, runbook, action; never the node)."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio import workflow

from contract import metrics as metric


def remediation_finished(pool: str, runbook: str, outcome: str) -> None:
    workflow.metric_meter().create_counter(*metric.REMEDIATIONS.args).add(
        1, {"pool": pool, "runbook": runbook, "outcome": outcome}
    )


def rung_finished(pool: str, action: str, result: str, seconds: float) -> None:
    """Time in each rung (the action, its settle and verification), by how it ended."""
    workflow.metric_meter().create_histogram_float(*metric.RUNG_DURATION.args).record(
        seconds, {"pool": pool, "action": action, "result": result}
    )


def message_refused(pool: str, message: str) -> None:
    """A message a ladder did not take: a report that did not prove who sent it, a grant or
    leave that did not answer its request, an operator's signal refused (workflows/door.py)."""
    workflow.metric_meter().create_counter(*metric.MESSAGES_REFUSED.args).add(
        1, {"pool": pool, "message": message}
    )


def node_cordoned(pool: str, since_detection_s: float) -> None:
    """A cordon, and how long after the finding that chose the runbook (0 when the agent's
    clock runs ahead of the controller's)."""
    meter, labels = workflow.metric_meter(), {"pool": pool}
    meter.create_counter(*metric.NODES_CORDONED.args).add(1, labels)
    meter.create_histogram_float(*metric.DETECTION_TO_CORDON.args).record(
        max(since_detection_s, 0.0), labels
    )


def pool_budget(pool: str, tripped: bool, leases: int, waiting: int, held: int = 0) -> None:
    """``pool``: a pool, or ``_cluster`` for the cluster-wide breaker."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(*metric.STORM_BREAKER_TRIPPED.args).set(int(tripped), labels)
    meter.create_gauge(*metric.CORDONS_HELD.args).set(held, labels)
    meter.create_gauge(*metric.DISRUPTION_LEASES_HELD.args).set(leases, labels)
    meter.create_gauge(*metric.DISRUPTION_LEASES_WAITING.args).set(waiting, labels)


def held_by_people(pool: str, shares: int, seized: bool) -> None:
    """Shares of the pool's budget only a person can free (ladders holding a lease while they
    wait for an approval, nodes left cordoned for a person), and whether they are all of them
    with ladders waiting behind (remedy/disruption/held_by_people.py)."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(*metric.LEASES_HELD_BY_WAITING_FOR_HUMAN.args).set(shares, labels)
    meter.create_gauge(*metric.POOL_HELD_BY_PEOPLE.args).set(int(seized), labels)


def breaker_tripped(pool: str) -> None:
    workflow.metric_meter().create_counter(*metric.STORM_BREAKER_TRIPS.args).add(1, {"pool": pool})


def agents_silent(pool: str, silent: int, storm: bool) -> None:
    """Per pool (``_cluster``: the fleet): agents silent now, and 1 while they are a storm
    (no AgentSilent ladders)."""
    meter, labels = workflow.metric_meter(), {"pool": pool}
    meter.create_gauge(*metric.AGENTS_SILENT.args).set(silent, labels)
    meter.create_gauge(*metric.AGENT_SILENCE_STORM.args).set(int(storm), labels)


def job_failure(verdict: str, action: str) -> None:
    """A guarded job's failure (its lead pod), by verdict and what the guard did."""
    workflow.metric_meter().create_counter(*metric.JOB_FAILURES.args).add(
        1, {"verdict": verdict, "action": action}
    )


def job_goodput(pool: str, job: str, ratio: float) -> None:
    """A guarded job's productive share of its own GPU-time (remedy/attribution/goodput.py)."""
    workflow.metric_meter().create_gauge_float(*metric.JOB_GOODPUT_RATIO.args).set(
        ratio, {"pool": pool or "unknown", "job": job}
    )


def pool_goodput(pool: str, ratio: float) -> None:
    """Guarded jobs' productive GPU-time over the pool's GPUs in the last day."""
    workflow.metric_meter().create_gauge_float(*metric.POOL_GOODPUT_RATIO.args).set(
        ratio, {"pool": pool}
    )


def job_ended(outcome: str, cause: str) -> None:
    """A guarded job's end: succeeded, failed (by the verdict that ended it) or deleted."""
    workflow.metric_meter().create_counter(*metric.JOBS_ENDED.args).add(
        1, {"outcome": outcome, "cause": cause or "none"}
    )


def slow_node_suspicion(state: str) -> None:
    """A guarded job's slow-node suspicion reached ``state`` (remedy/attribution/suspicions.py)."""
    workflow.metric_meter().create_counter(*metric.SLOW_NODE_SUSPICIONS.args).add(
        1, {"state": state}
    )


def active_check(pool: str, result: str) -> None:
    """One node's scheduled deep diagnose, by result (passed, failed, deferred, skipped)."""
    workflow.metric_meter().create_counter(*metric.ACTIVE_CHECKS.args).add(
        1, {"pool": pool, "result": result}
    )


def active_checks_overdue(pool: str, nodes: int) -> None:
    workflow.metric_meter().create_gauge(*metric.ACTIVE_CHECKS_OVERDUE.args).set(
        nodes, {"pool": pool}
    )


def clock_skew(pool: str, skewed: int, largest_s: int) -> None:
    """Nodes whose clock is off the controller's beyond remedy.scan.liveness.SKEW_TOLERANCE, and
    the largest skew known in the pool, either way (a gauge cannot go negative). Reported,
    never trusted: liveness is judged on the controller's clock."""
    meter = workflow.metric_meter()
    labels = {"pool": pool}
    meter.create_gauge(*metric.NODES_CLOCK_SKEWED.args).set(skewed, labels)
    meter.create_gauge(*metric.CLOCK_SKEW_LARGEST_SECONDS.args).set(abs(largest_s), labels)


def fleet_scanned() -> None:
    """One fleet scan finished: a controller whose workers stall stops counting."""
    workflow.metric_meter().create_counter(*metric.FLEET_SCANS.args).add(1)


def fleet_nodes(pool: str, counts: Mapping[str, int]) -> None:
    """The pool's nodes by status; every status is set, 0 included, so none shows stale."""
    gauge = workflow.metric_meter().create_gauge(*metric.FLEET_NODES.args)
    for status, nodes in counts.items():
        gauge.set(nodes, {"pool": pool, "status": status})


def ladders(pool: str, phase: str, running: int, oldest_s: float) -> None:
    """Running ladders in ``phase``, and the time in it of the one longest there."""
    meter, labels = workflow.metric_meter(), {"pool": pool, "phase": phase}
    meter.create_gauge(*metric.LADDERS.args).set(running, labels)
    meter.create_gauge_float(*metric.LADDER_PHASE_OLDEST_SECONDS.args).set(oldest_s, labels)
