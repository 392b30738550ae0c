"""What the demo says it did: every remediation it started, by outcome or by the phase it is
in, and the guarded jobs as their guards tell."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from temporalio.client import Client, WorkflowExecutionStatus

from contract.messages import REMEDIATION_STATE
from workers.job_status import HEADERS as JOB_HEADERS
from workers.job_status import JobRow, job_success
from workers.job_status import table_rows as job_table
from workers.tables import plain
from workflows.node_remediation import NodeRemediation


@dataclass
class DemoSummary:
    faults_injected: int = 0
    runs: list[tuple[str, str]] = field(default_factory=list)  # (workflow id, run id)
    outcomes: Counter[str] = field(default_factory=Counter)  # closed: by outcome; open: phase
    jobs: list[JobRow] = field(default_factory=list)  # the guarded jobs, as the guards tell

    @property
    def workflow_ids(self) -> list[str]:
        return list(dict.fromkeys(workflow_id for workflow_id, _ in self.runs))

    def lines(self) -> list[str]:
        out = [
            f"Remediations by outcome ({len(self.runs)} remediations on "
            f"{len(self.workflow_ids)} nodes, {self.faults_injected} faults injected):"
        ]
        out += [f"  {name:<28} {count:>4}" for name, count in sorted(self.outcomes.items())]
        if self.jobs:
            out += [
                "",
                "Guarded jobs (remedy status --jobs):",
                *(f"  {line}" for line in plain(JOB_HEADERS, job_table(self.jobs))),
                f"  {job_success(self.jobs)}",
            ]
        return out


async def summarise(client: Client, summary: DemoSummary) -> None:
    """The outcome of every remediation started, or the phase it is in while it runs."""
    counts: Counter[str] = Counter()
    for workflow_id, run_id in summary.runs:
        handle = client.get_workflow_handle_for(NodeRemediation.run, workflow_id, run_id=run_id)
        status = (await handle.describe()).status
        if status is WorkflowExecutionStatus.CONTINUED_AS_NEW:  # report where the chain is now
            handle = client.get_workflow_handle_for(NodeRemediation.run, workflow_id)
            status = (await handle.describe()).status
        if status is WorkflowExecutionStatus.COMPLETED:
            counts[(await handle.result()).outcome.value] += 1
        elif status is WorkflowExecutionStatus.RUNNING:
            state = await REMEDIATION_STATE.ask(handle)
            counts[f"running: {state.phase.value}"] += 1
        else:
            counts[f"workflow {status.name.lower() if status else 'unknown'}"] += 1
    summary.outcomes = counts
