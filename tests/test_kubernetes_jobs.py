"""Contract tests of the job side on Kubernetes: the real client over real HTTP against the API
emulator. What a failed pod of a guarded job tells, and how a Job is restarted and stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.job_failures import GUARD_LABEL, JOB_LABEL, REPORTED
from adapters.kubernetes.jobs import (
    RESTART_ATTEMPT,
    RESTART_MODE,
    STOPPED,
    KubernetesJobs,
)
from adapters.kubernetes.objects import RECENT_XIDS
from kubeapi import ApiServer
from remedy.attribution.evidence import RecentXid
from remedy.attribution.guard import JobRef
from remedy.attribution.jobs import JobState
from remedy.core.errors import ActionFailed, ActionRefused
from tests.kube import JOBS, NODES, PODS, call, node, sent

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
LLM = JobRef(namespace="ml", name="llm")
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py"\nValueError: bad shape\n'


def iso(minutes: float) -> str:
    return (NOW + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def job_pod(
    name: str,
    node_name: str,
    *,
    job: str = "llm",
    phase: str = "Failed",
    exit_code: int | None = 1,
    guarded: bool = True,
    gpus: int = 8,
    started: float = -60,
    ended: float = 0,
    **status: Any,
) -> dict[str, Any]:
    labels = {"batch.kubernetes.io/job-name": job, **({GUARD_LABEL: "true"} if guarded else {})}
    terminated = {"exitCode": exit_code, "reason": "Error", "finishedAt": iso(ended)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": status.pop("annotations", {}),
        },
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "trainer",
                    "image": "i",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
        "status": {
            "phase": phase,
            "startTime": iso(started),
            "containerStatuses": [
                {
                    "name": "trainer",
                    "image": "i",
                    "imageID": "i",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated}
                    if exit_code is not None
                    else {"running": {}},
                }
            ],
            **status,
        },
    }


def failed_job(
    name: str = "llm",
    *,
    conditions: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    generated = {
        "batch.kubernetes.io/controller-uid": "u1",
        "controller-uid": "u1",
        "batch.kubernetes.io/job-name": name,
        "job-name": name,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": "u1",
            "labels": {GUARD_LABEL: "true", "team": "lm", **generated},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                **(annotations or {}),
            },
        },
        "spec": {
            "backoffLimit": 0,
            "suspend": suspend,
            "template": {
                "metadata": {"labels": {GUARD_LABEL: "true", **generated}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "trainer", "image": "trainer:v3"}],
                },
            },
        },
        "status": {
            "conditions": [{"type": "Failed", "status": "True"}]
            if conditions is None
            else conditions
        },
    }


def xids_annotation(*xids: RecentXid) -> dict[str, str]:
    return {RECENT_XIDS: json.dumps([x.model_dump(mode="json") for x in xids])}


@pytest.fixture
def jobs(api: ApiServer) -> KubernetesJobs:
    return KubernetesJobs(api.client(), clock=lambda: NOW)


async def test_a_failed_pod_of_a_guarded_job_comes_with_its_evidence(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    mine = RecentXid(code=13, gpu="SN-1", at=NOW - timedelta(minutes=5), pid=4242, process="python")
    before = RecentXid(code=31, gpu="SN-1", at=NOW - timedelta(hours=3))  # another job's run
    sick = node("n1", annotations=xids_annotation(mine, before))
    sick["status"]["conditions"].append(
        {
            "type": "GpuProblem",
            "status": "True",
            "reason": "Xid79",
            "message": "GPU fell off the bus",
            "lastTransitionTime": iso(-1),
        }
    )
    api.objects[NODES, None, "n1"] = sick
    api.objects[NODES, None, "n2"] = node("n2")
    api.objects[PODS, "ml", "llm-0"] = job_pod("llm-0", "n1")
    api.objects[PODS, "ml", "llm-1"] = job_pod("llm-1", "n2", phase="Running", exit_code=None)
    api.objects[PODS, "ml", "old-0"] = job_pod("old-0", "n1", annotations={REPORTED: "g"})
    api.objects[PODS, "ml", "web-0"] = job_pod("web-0", "n2", job="web", guarded=False)
    api.objects[PODS, "ml", "prev-0"] = job_pod(
        "prev-0", "n1", job="prev", phase="Succeeded", exit_code=0, started=-240, ended=-120
    )
    api.logs["ml", "llm-0"] = TRACEBACK

    [got] = await call(jobs.failed_pods)

    failure = got.failure
    assert (got.job, got.pod_uid, got.job_nodes) == (LLM, "uid-llm-0", ["n1", "n2"])
    assert (failure.job, failure.pod, failure.node, failure.failed_at) == (
        "ml/llm",
        "llm-0",
        "n1",
        NOW,
    )
    assert (failure.termination.exit_code, failure.termination.reason) == (1, "Error")
    assert failure.termination.disruption is None and not failure.node_gone
    assert failure.log_tail == TRACEBACK
    # Failed guarded pods in one list; the job's other pods only because it has a failure.
    [failed_list] = [
        r.query for r in sent(api, "GET", "/api/v1/pods") if "labelSelector" in r.query
    ]
    assert failed_list == {
        "labelSelector": f"{GUARD_LABEL}=true",
        "fieldSelector": "status.phase=Failed",
        "limit": "500",  # a page at a time
    }
    [job_list] = sent(api, "GET", "/api/v1/namespaces/ml/pods")
    assert job_list.query == {"labelSelector": f"{GUARD_LABEL}=true", "limit": "500"}
    [log_request] = sent(api, "GET", "/api/v1/namespaces/ml/pods/llm-0/log")
    assert log_request.query == {"container": "trainer", "tailLines": "100"}
    assert [(f.node, f.reason, f.xid) for f in failure.findings] == [("n1", "Xid79", 79)]
    # Each Xid tied to the job whose pod held the node's GPUs at that moment.
    assert sorted((x.code, x.job, x.pid) for x in failure.xids) == [
        (13, "ml/llm", 4242),
        (31, "ml/prev", None),
    ]


async def test_a_pod_evicted_from_a_node_that_is_gone(api: ApiServer, jobs: KubernetesJobs) -> None:
    api.objects[PODS, "ml", "llm-0"] = job_pod(
        "llm-0",
        "lost",
        exit_code=None,
        reason="Evicted",
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "lastTransitionTime": iso(-2),
            }
        ],
    )

    [got] = await call(jobs.failed_pods)

    assert got.failure.node_gone and got.failure.failed_at == NOW - timedelta(minutes=2)
    assert got.failure.termination.disruption == "DeletionByTaintManager"
    assert got.failure.termination.reason == "Evicted" and got.failure.log_tail == ""
    assert sent(api, "GET", "/api/v1/namespaces/ml/pods/llm-0/log") == []  # no kubelet


async def test_a_reported_failure_is_not_listed_again(api: ApiServer, jobs: KubernetesJobs) -> None:
    api.objects[NODES, None, "n1"] = node("n1")
    api.objects[PODS, "ml", "llm-0"] = job_pod("llm-0", "n1")
    [got] = await call(jobs.failed_pods)
    await call(jobs.mark_reported, got, "job-guard/ml/llm")
    assert (
        api.objects[PODS, "ml", "llm-0"]["metadata"]["annotations"][REPORTED] == "job-guard/ml/llm"
    )
    assert await call(jobs.failed_pods) == []


async def test_a_failed_job_is_recreated_once_per_attempt_and_the_failed_one_kept(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job()

    said = await call(jobs.restart_job, LLM, 1, "platform fault: Xid 79")
    again = await call(jobs.restart_job, LLM, 1, "platform fault: Xid 79")  # a retried activity

    [created] = sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs")
    copy = created.data
    assert copy["metadata"]["name"] == "llm-r1" and "created llm-r1" in said
    assert "already restarted" in again
    assert copy["metadata"]["labels"] == {GUARD_LABEL: "true", "team": "lm", JOB_LABEL: "llm"}
    assert copy["metadata"]["annotations"] == {
        RESTART_ATTEMPT: "1",
        "remedy.io/restart-reason": "platform fault: Xid 79",
    }
    assert "selector" not in copy["spec"] and "suspend" not in copy["spec"]
    assert copy["spec"]["template"]["metadata"]["labels"] == {GUARD_LABEL: "true", JOB_LABEL: "llm"}
    assert copy["spec"]["template"]["spec"]["containers"][0]["image"] == "trainer:v3"
    assert (JOBS, "ml", "llm") in api.objects  # the failed Job stays for the post-mortem
    [event] = [r.data for r in sent(api, "POST", "/api/v1/namespaces/ml/events")][:1]
    assert (event["involvedObject"]["kind"], event["reason"]) == ("Job", "RemedyRestarted")
    assert await call(jobs.job_state, LLM) is JobState.RUNNING  # the copy is the job now


async def test_a_job_still_running_is_left_to_its_own_controller(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job(conditions=[])
    said = await call(jobs.restart_job, LLM, 1, "why")
    assert "still runs" in said
    assert sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs") == []
    assert api.objects[JOBS, "ml", "llm"]["metadata"]["annotations"][RESTART_ATTEMPT] == "1"


async def test_an_operator_job_is_asked_to_restart_by_annotation(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job(annotations={RESTART_MODE: "annotate"})
    await call(jobs.restart_job, LLM, 3, "why")
    assert api.objects[JOBS, "ml", "llm"]["metadata"]["annotations"][RESTART_ATTEMPT] == "3"
    assert sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs") == []


async def test_stop_suspends_the_job_and_a_restart_resumes_it(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job(conditions=[])
    await call(jobs.stop_job, LLM, "unknown cause again: held for a human")
    stopped = api.objects[JOBS, "ml", "llm"]
    assert stopped["spec"]["suspend"] is True
    assert stopped["metadata"]["annotations"][STOPPED] == "unknown cause again: held for a human"
    assert await call(jobs.job_state, LLM) is JobState.SUSPENDED

    with pytest.raises(ActionRefused, match="only a person resumes it"):
        await call(jobs.restart_job, LLM, 1, "unknown cause: one retry")  # no automatic undo
    await call(jobs.restart_job, LLM, 1, "resumed by alice", "alice")
    resumed = api.objects[JOBS, "ml", "llm"]
    assert resumed["spec"]["suspend"] is False and STOPPED not in resumed["metadata"]["annotations"]


async def test_remedy_does_not_resume_what_someone_else_suspended(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job(conditions=[], suspend=True)
    with pytest.raises(ActionRefused, match="suspended by someone else"):
        await call(jobs.restart_job, LLM, 1, "why")


async def test_job_states_and_a_deleted_job(api: ApiServer, jobs: KubernetesJobs) -> None:
    assert await call(jobs.job_state, LLM) is JobState.GONE
    with pytest.raises(ActionFailed, match="no longer exists"):
        await call(jobs.restart_job, LLM, 1, "why")
    api.objects[JOBS, "ml", "llm"] = failed_job(conditions=[{"type": "Complete", "status": "True"}])
    assert await call(jobs.job_state, LLM) is JobState.SUCCEEDED
    assert JobState.SUCCEEDED.finished and not JobState.FAILED.finished


async def test_the_agent_keeps_its_xids_on_the_node_bounded(
    api: ApiServer,
) -> None:
    old = RecentXid(code=13, gpu="SN-1", at=NOW - timedelta(days=8))  # past the week kept
    kept = RecentXid(code=31, gpu="SN-2", at=NOW - timedelta(hours=1))
    api.objects[NODES, None, "n1"] = node("n1", annotations=xids_annotation(old, kept))
    marks = kubernetes_cluster(api.client(), clock=lambda: NOW).marks
    new = [RecentXid(code=79, gpu="SN-3", at=NOW, pid=7, process="python")]

    await call(marks.record_xids, "n1", new)
    await call(marks.record_xids, "n1", new)  # NVML and the kernel log both saw it

    stored = json.loads(api.objects[NODES, None, "n1"]["metadata"]["annotations"][RECENT_XIDS])
    assert [(x["code"], x["gpu"]) for x in stored] == [(31, "SN-2"), (79, "SN-3")]
    assert stored[1]["pid"] == 7
    # A rung's quiet watch reads them back: only those since the rung ended.
    since = await call(marks.xids_since, "n1", NOW - timedelta(minutes=10))
    assert [(x.code, x.gpu) for x in since] == [(79, "SN-3")]
