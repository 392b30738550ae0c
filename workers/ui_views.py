"""The Web UI views an operator should save (`remedy ui` prints them, docs/ui.md lists them): a
query each, and the columns that make the list readable — this UI shows workflow ids only, so
remedy's search attributes are what tell one ladder from another. The first view is the fleet
as an operator wants it by default: running ladders and admissions, without the hardware
records and the schedules' runs that would bury them. A view's name is letters and spaces: the
UI refuses a name with a colon."""

from __future__ import annotations

from urllib.parse import quote

from pydantic import BaseModel

from contract import search_attributes as sa
from contract.names import (
    DISRUPTION_BUDGET_WORKFLOW,
    JOB_GUARD_WORKFLOW,
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
)
from remedy.attribution.guard import GuardPhase
from remedy.ladder.describe import HELD
from remedy.ladder.remediation import Outcome, Phase

RUNNING = "ExecutionStatus = 'Running'"
# The columns to add (Configure Columns), in this order: who, where, what now, since when.
COLUMNS: list[str] = [
    key.name for key in (sa.NODE, sa.POOL, sa.PHASE, sa.RUNG, sa.FAULT, sa.LEASE, sa.PHASE_SINCE)
]

# A job guard's: which job, what the guard does (held: a person resumes or stops it), since when.
GUARD_COLUMNS: list[str] = [key.name for key in (sa.JOB, sa.JOB_STATE, sa.PHASE_SINCE)]


class View(BaseModel):
    name: str
    query: str
    columns: list[str] = COLUMNS


def _types(*names: str) -> str:
    return "WorkflowType IN (" + ", ".join(f"'{n}'" for n in names) + ")"


VIEWS = [
    View(
        name="remedy fleet",
        query=f"{_types(NODE_REMEDIATION_WORKFLOW, NODE_ADMISSION_WORKFLOW)} AND {RUNNING}",
    ),
    View(
        name="remedy waiting for an approval",
        query=f"{sa.PHASE.name} = '{Phase.AWAITING_APPROVAL.value}' AND {RUNNING}",
    ),
    View(
        name="remedy waiting for a lease",
        query=f"{sa.PHASE.name} = '{Phase.AWAITING_LEASE.value}' AND {RUNNING}",
    ),
    View(
        name="remedy holding a lease",
        query=f"{sa.LEASE.name} = '{HELD}' AND {RUNNING}",
    ),
    View(  # ladders that ended so, and job guards held for a person now
        name="remedy left for a human",
        query=f"{sa.OUTCOME.name} = '{Outcome.NEEDS_HUMAN.value}'",
        columns=[key.name for key in (sa.NODE, sa.POOL, sa.FAULT, sa.RUNG, sa.OUTCOME, sa.JOB)],
    ),
    View(
        name="remedy budgets",
        query=f"WorkflowType = '{DISRUPTION_BUDGET_WORKFLOW}' AND {RUNNING}",
        columns=[],  # a budget says who blocks whom in its details (open it)
    ),
    View(
        name="remedy job guards",
        query=f"WorkflowType = '{JOB_GUARD_WORKFLOW}' AND {RUNNING}",
        columns=GUARD_COLUMNS,
    ),
    View(
        name="remedy jobs held for a human",
        query=f"{sa.JOB_STATE.name} = '{GuardPhase.HELD.value}' AND {RUNNING}",
        columns=GUARD_COLUMNS,
    ),
]


def list_url(ui: str, namespace: str, query: str) -> str:
    """The workflow list with ``query`` typed in (the UI reads ``?query=``)."""
    return f"{ui.rstrip('/')}/namespaces/{quote(namespace)}/workflows?query={quote(query)}"


def text(ui: str, namespace: str) -> list[str]:
    """What `remedy ui` prints: each view's name, URL, query and columns."""
    out = []
    for view in VIEWS:
        out += [
            view.name,
            f"  {list_url(ui, namespace, view.query)}",
            f"  query:   {view.query}",
            f"  columns: {', '.join(view.columns) or '(the defaults)'}",
        ]
    return out


def markdown() -> str:
    """The views as docs/ui.md lists them (a test keeps the two the same)."""
    rows = [
        f"| {v.name} | `{v.query}` | {', '.join(v.columns) or '(the defaults)'} |" for v in VIEWS
    ]
    return "\n".join(["| view | query | columns |", "|---|---|---|", *rows])
