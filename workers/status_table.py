"""`remedy status` as a person reads it: the pools' and the nodes' tables, the alerts above
them and the heading (workers/status.py reads what they show from Temporal)."""

from __future__ import annotations

from datetime import UTC, datetime

from remedy.core.display import visible
from remedy.disruption import held_by_people as people
from remedy.disruption.budget import CLUSTER_POOL
from remedy.disruption.budget_gpus import gpu_note
from remedy.scan.fleet import NodeStatus
from workers.status import FleetStatus
from workers.tables import plain, show

COLUMNS = [
    NodeStatus.HEALTHY,
    NodeStatus.IN_REMEDIATION,
    NodeStatus.DEGRADED,
    NodeStatus.NEEDS_HUMAN,
    NodeStatus.CORDONED,
    NodeStatus.ADMITTING,
    NodeStatus.REJECTED,
    NodeStatus.UNHEALTHY,
    NodeStatus.SILENT,
    NodeStatus.UNKNOWN,
    NodeStatus.UNMANAGED,
    NodeStatus.OTHER_REPAIRER,
]


POOL_HEADERS = [
    "pool",
    "nodes",
    *(c.value.replace("_", " ") for c in COLUMNS),
    "GPUs out",
    "leases",
    "GPU leases",
    "waiting",
    "people",
    "breaker",
]
NODE_HEADERS = ["node", "pool", "state", "fault", "runbook", "rung", "since", "approval"]


def pool_rows(status: FleetStatus) -> list[list[str]]:
    rows = []
    for pool in status.pools:
        budget = pool.budget
        leases = f"{budget.in_use}/{budget.allowed}" if budget else "-"
        rows.append(
            [
                pool.summary.pool,
                str(pool.summary.nodes),
                *(str(pool.summary.count(c)) for c in COLUMNS),
                str(pool.summary.gpus_out),
                leases,
                gpu_note(budget) if budget else "-",
                str(len(budget.waiting)) if budget else "-",
                f"{len(pool.held_by_people)}{' SEIZED' if pool.seized else ''}" if budget else "-",
                "TRIPPED" if pool.tripped else "ok",
            ]
        )
    return rows


def node_rows(status: FleetStatus) -> list[list[str]]:
    return [
        [
            r.node,
            r.pool,
            r.state.replace("_", " "),
            r.fault or "-",
            r.runbook or "-",
            r.rung or "-",
            f"{r.since:%m-%d %H:%M:%S}" if r.since else "-",
            "WAITING" if r.awaiting_approval else "-",
        ]
        for r in status.nodes
    ]


def alerts(status: FleetStatus) -> list[str]:
    lines = []
    if status.silence is not None:
        lines.append(f"ALERT agents silent: {status.silence.note()}")
    tripped = [(p.summary.pool, p.budget) for p in status.pools if p.tripped and p.budget]
    if status.cluster is not None and status.cluster.tripped:
        tripped.append((CLUSTER_POOL, status.cluster))
    for pool, budget in tripped:
        where = "the cluster" if pool == CLUSTER_POOL else f"pool {pool}"
        lines += [
            f"ALERT {where}: {budget.breaker_note}"
            + (f"; {len(budget.asking)} cordons held" if budget.asking else ""),
            f"      resume with: remedy resume-pool {pool}",
        ]
    for p in status.pools:  # people hold its shares: who, since when, and what frees each
        if p.budget:
            lines += people.status_lines(p.budget, status.at or datetime.now(UTC))
    waiting = [r.node for r in status.nodes if r.awaiting_approval]
    if waiting:
        lines.append(
            f"{len(waiting)} waiting for approval: remedy approve NODE "
            f"({', '.join(waiting[:5])}{', ...' if len(waiting) > 5 else ''})"
        )
    if status.job_watch_error:
        lines.append(
            f"ALERT the job watch failed (guarded jobs' failures wait): {status.job_watch_error}"
        )
    return lines


def heading(status: FleetStatus) -> str:
    if status.scanned_at is None:
        return "no fleet scan yet: pool counts unknown (is the controller running?)"
    return f"fleet scanned at {status.scanned_at:%Y-%m-%d %H:%M:%S} UTC"


def show_status(status: FleetStatus) -> None:
    """Print the status: rich tables on a terminal, plain text otherwise."""
    print(heading(status))
    if status.pools:
        show(POOL_HEADERS, pool_rows(status), title="pools")
    if status.nodes:
        show(NODE_HEADERS, node_rows(status), title="nodes")
    else:
        print("no node in remediation, admission or waiting for a human")
    for line in alerts(status):
        print(visible(line))  # an alert can quote an error or a person's note


def render(status: FleetStatus) -> list[str]:
    """The same as plain lines (the demo's closing summary)."""
    lines = [heading(status)]
    if status.pools:
        lines += ["", *plain(POOL_HEADERS, pool_rows(status))]
    if status.nodes:
        lines += ["", *plain(NODE_HEADERS, node_rows(status))]
    return lines + [visible(line) for line in alerts(status)]
