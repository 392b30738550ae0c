"""Replay recorded NodeRemediation and JobGuard histories against today's workflow code.

A change that makes a running workflow non-deterministic (reordered activities, a timer added
without workflow.patched) fails here instead of in production."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_recorded() -> None:
    assert {h.stem for h in HISTORIES} == {
        "reset_fixes_ecc",
        "replace_after_approval",
        "reset_fixes_ecc_v2",
        "replace_after_approval_v2",
        "job_guard_restart_then_stop",
    }
    # v2: recorded after remedy began indexing ladders, so their replay covers the upserts.
    for path in (h for h in HISTORIES if not h.stem.startswith("job_guard")):
        upserts = path.read_text().count("UPSERT_WORKFLOW_SEARCH_ATTRIBUTES")
        assert (upserts > 0) == path.stem.endswith("_v2"), path.stem


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[NodeRemediation, JobGuard], data_converter=pydantic_data_converter
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
