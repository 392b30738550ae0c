"""The job side in dry run, on the API emulator: no write reaches a Job or a pod, and every
Event says what remedy would have done (``RemedyDryRun``, "would ..."), none that it did."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from adapters.kubernetes.jobs import RESTART_MODE, STOPPED, KubernetesJobs
from kubeapi import ApiServer
from tests.kube import NODES, PODS, call, node
from tests.test_kubernetes_jobs import JOBS, LLM, NOW, failed_job, job_pod

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
EVENTS = "/api/v1/namespaces/ml/events"

RUNNING: list[dict[str, str]] = []
SCENES: dict[str, tuple[dict[str, Any], Callable[[KubernetesJobs], str], str]] = {
    "recreate a failed job": (
        failed_job(),
        lambda jobs: jobs.restart_job(LLM, 1, "platform fault: Xid 79"),
        "would create llm-r1 from the failed llm (restart 1): platform fault: Xid 79",
    ),
    "a running job's restart": (
        failed_job(conditions=RUNNING),
        lambda jobs: jobs.restart_job(LLM, 1, "why"),
        "would note restart 1 on the Job",
    ),
    "ask an operator to restart": (
        failed_job(annotations={RESTART_MODE: "annotate"}),
        lambda jobs: jobs.restart_job(LLM, 3, "why"),
        "would request restart 3 from the job's operator",
    ),
    "stop a running job": (
        failed_job(conditions=RUNNING),
        lambda jobs: jobs.stop_job(LLM, "held for a human"),
        "would suspend the Job: held for a human",
    ),
    "stop a failed job": (
        failed_job(),
        lambda jobs: jobs.stop_job(LLM, "application fault"),
        "would stop the job (it is failed and stays so): application fault",
    ),
    "resume a job remedy stopped": (
        failed_job(conditions=RUNNING, suspend=True, annotations={STOPPED: "held"}),
        lambda jobs: jobs.restart_job(LLM, 1, "resumed by alice", "alice"),
        "would resume the Job for alice (restart 1): resumed by alice",
    ),
}


@pytest.mark.parametrize("scene", SCENES)
async def test_dry_run_writes_nothing_and_every_event_says_would(
    api: ApiServer, scene: str
) -> None:
    job, act, would = SCENES[scene]
    api.objects[JOBS, "ml", "llm"] = copy.deepcopy(job)
    stored = api.objects[JOBS, "ml", "llm"]
    jobs = KubernetesJobs(api.client(), dry_run=True, clock=lambda: NOW)

    said = await call(act, jobs)

    writes = [(r.method, r.path) for r in api.requests if r.method in WRITES]
    events = [r.data for r in api.requests if r.method == "POST" and r.path == EVENTS]
    assert writes == [("POST", EVENTS)] * len(events), writes  # only the notices
    assert [(e["reason"], e["message"][: len(would)]) for e in events] == [("RemedyDryRun", would)]
    assert events[0]["involvedObject"]["kind"] == "Job"
    assert said.startswith("llm: would ") and would in said
    assert api.objects[JOBS, "ml", "llm"] == stored  # the Job as it was


async def test_dry_run_leaves_a_reported_pod_unmarked(api: ApiServer) -> None:
    """Marking a pod reported is remedy's bookkeeping, not an action on the job: in dry run it
    is skipped (logged), and no Event claims anything about the pod."""
    api.objects[NODES, None, "n1"] = node("n1")
    api.objects[PODS, "ml", "llm-0"] = job_pod("llm-0", "n1")
    jobs = KubernetesJobs(api.client(), dry_run=True, clock=lambda: NOW)

    [failure] = await call(jobs.failed_pods)
    await call(jobs.mark_reported, failure, "job-guard/ml/llm")

    assert [r for r in api.requests if r.method in WRITES] == []
    assert len(await call(jobs.failed_pods)) == 1  # still listed: nothing was written
