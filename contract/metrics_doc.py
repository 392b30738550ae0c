"""docs/metrics.md's table, written from the declarations (contract/metrics.py): each metric as
Prometheus shows it, its type, labels and meaning; then the SDK's that remedy's alerts and
dashboard read. ``python -m tests.generated_docs`` writes it into the doc."""

from __future__ import annotations

from contract.metrics import GLOBAL_LABELS, SDK_METRICS, WORKFLOW_LABELS, Metric, declared, exposed

HEAD = (
    "| as Prometheus shows it | type | labels | meaning | recorded by, when |\n"
    "|---|---|---|---|---|"
)


def _row(m: Metric) -> str:
    names = ", ".join(f"`{n}`" for n in exposed(m))
    kind = f"{m.kind}, seconds" if m.unit == "s" else m.kind
    labels = ", ".join([*m.labels, *(["le"] if m.kind == "histogram" else [])]) or "—"
    return f"| {names} | {kind} | {labels} | {m.description} | {m.recorded} |"


def metrics_markdown() -> str:
    own = "\n".join(_row(m) for m in declared())
    sdk = "\n".join(_row(m) for m in SDK_METRICS)
    every = ", ".join(f"`{label}`" for label in GLOBAL_LABELS)
    workflow = ", ".join(f"`{label}`" for label in WORKFLOW_LABELS)
    return (
        f"Every sample also carries {every} (`remedy_role`: the process, `controller`, `agent` "
        f"or `demo`); what workflows record (every remedy metric but the agent's probes, "
        f"findings and dependencies) also {workflow}; Prometheus adds `job` and `instance`."
        "\n\n"
        f"### remedy's\n\n{HEAD}\n{own}\n\n"
        f"### The Temporal SDK's that the alerts and the dashboard read\n\n{HEAD}\n{sdk}"
    )
