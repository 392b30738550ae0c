"""remedy's search attributes: what the Web UI and `remedy status` filter on, e.g.
``RemedyPhase = 'awaiting_approval'`` or ``RemedyGpuSerials = '1650924060123'``.

A server must know them before a workflow sets them (an unknown one fails the workflow task), so
the dev server starts with them (``dev_server_flags``), compose registers them with the admin
tools, and the controller registers any missing at startup."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributeUpdate,
)

with workflow.unsafe.imports_passed_through():  # not re-imported into each workflow's sandbox
    from remedy.ladder.describe import NodeIndex

NODE = SearchAttributeKey.for_keyword("RemedyNode")
POOL = SearchAttributeKey.for_keyword("RemedyPool")
FAULT = SearchAttributeKey.for_keyword("RemedyFault")
RUNBOOK = SearchAttributeKey.for_keyword("RemedyRunbook")
RUNG = SearchAttributeKey.for_keyword("RemedyRung")
PHASE = SearchAttributeKey.for_keyword("RemedyPhase")
PHASE_SINCE = SearchAttributeKey.for_datetime("RemedyPhaseSince")
OUTCOME = SearchAttributeKey.for_keyword("RemedyOutcome")
GPU_SERIALS = SearchAttributeKey.for_keyword_list("RemedyGpuSerials")
# Every rung the ladder ran so far (RUNG is only the current one): "all reboots in a pool" is
# ``RemedyPool = 'default' AND RemedyRungsRun = 'reboot'``.
RUNGS_RUN = SearchAttributeKey.for_keyword_list("RemedyRungsRun")
LEASE = SearchAttributeKey.for_keyword("RemedyLease")
# A JobGuard's: which job ("namespace/name") and what the guard does with it (the guard's
# phase: watching, restarting, held, ...). A held guard also sets OUTCOME to needs_human and
# PHASE_SINCE, so "left for a human" lists it beside the ladders and says since when.
JOB = SearchAttributeKey.for_keyword("RemedyJob")
JOB_STATE = SearchAttributeKey.for_keyword("RemedyJobState")

ALL: list[SearchAttributeKey[Any]] = [
    NODE,
    POOL,
    FAULT,
    RUNBOOK,
    RUNG,
    PHASE,
    PHASE_SINCE,
    OUTCOME,
    GPU_SERIALS,
    LEASE,
    JOB,
    JOB_STATE,
    RUNGS_RUN,
]

# The type names the `temporal` CLI takes (--search-attribute Name=Type).
_CLI_TYPE = {
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
}


def cli_type(key: SearchAttributeKey[Any]) -> str:
    return _CLI_TYPE[key.indexed_value_type]


def dev_server_flags() -> list[str]:
    return [arg for key in ALL for arg in ("--search-attribute", f"{key.name}={cli_type(key)}")]


def updates(index: NodeIndex) -> list[SearchAttributeUpdate[Any]]:
    """Every attribute of a remediation; empty values unset the attribute."""
    keyword = [
        (NODE, index.node),
        (POOL, index.pool),
        (FAULT, index.fault),
        (RUNBOOK, index.runbook),
        (RUNG, index.rung),
        (PHASE, index.phase),
        (OUTCOME, index.outcome),
    ]
    out: list[SearchAttributeUpdate[Any]] = [
        k.value_set(v) if v else k.value_unset() for k, v in keyword
    ]
    since: datetime | None = index.phase_since
    out.append(PHASE_SINCE.value_set(since) if since else PHASE_SINCE.value_unset())
    out.append(
        GPU_SERIALS.value_set(index.gpu_serials) if index.gpu_serials else GPU_SERIALS.value_unset()
    )
    out.append(LEASE.value_set(index.lease) if index.lease else LEASE.value_unset())
    if index.rungs_run:  # only grows: never unset
        out.append(RUNGS_RUN.value_set(index.rungs_run))
    return out
