"""The copy of a failed Job that a restart creates, against the strict API server: every field
of the Job kept (those of a server newer than the client included), nothing the server set for
the old Job carried over."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.kubernetes.job_failures import GUARD_LABEL, JOB_LABEL
from adapters.kubernetes.jobs import KubernetesJobs
from kubeapi import ApiServer
from remedy.attribution.guard import JobRef
from tests.kube import JOBS, call, sent

pytestmark = pytest.mark.server  # an API emulator of its own (newer fields)

NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
LLM = JobRef(namespace="ml", name="llm")
# Fields a newer API server knows and this client's models do not (by OpenAPI definition).
NEWER = {
    "io.k8s.api.batch.v1.JobSpec": {"gangPolicy"},
    "io.k8s.api.core.v1.Container": {"restartRules"},
}
GANG = {"minMembers": 8, "timeoutSeconds": 600}
RULES = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]


@pytest.fixture
def newer_api() -> Iterator[ApiServer]:
    with ApiServer(extra_fields=NEWER) as server:
        yield server
        assert server.warnings == [], f"fields the server dropped: {server.warnings}"


def failed_job(*, manual_selector: bool = False) -> dict[str, Any]:
    """A guarded Job as its author wrote it (the server adds its selector and labels)."""
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "gangPolicy": GANG,
        "template": {
            "metadata": {"labels": {GUARD_LABEL: "true", "role": "trainer"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "trainer", "image": "trainer:v3", "restartRules": RULES}],
            },
        },
    }
    if manual_selector:
        spec["manualSelector"] = True
        spec["selector"] = {"matchLabels": {"role": "trainer"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": {GUARD_LABEL: "true", "team": "lm"}},
        "spec": spec,
        "status": {"conditions": [{"type": "Failed", "status": "True"}]},
    }


async def test_defect_9_a_restarted_job_keeps_fields_the_client_does_not_know(
    newer_api: ApiServer,
) -> None:
    newer_api.objects[JOBS, "ml", "llm"] = failed_job()
    old = newer_api.objects[JOBS, "ml", "llm"]
    jobs = KubernetesJobs(newer_api.client(), clock=lambda: NOW)

    said = await call(jobs.restart_job, LLM, 1, "platform fault: Xid 79")

    assert "created llm-r1" in said
    copy = newer_api.objects[JOBS, "ml", "llm-r1"]
    assert copy["spec"]["gangPolicy"] == GANG
    assert copy["spec"]["template"]["spec"]["containers"][0]["restartRules"] == RULES
    # Nothing the server set for the old Job: the copy has its own uid, selector and labels.
    [created] = sent(newer_api, "POST", "/apis/batch/v1/namespaces/ml/jobs")
    assert set(created.data["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert "status" not in created.data and "selector" not in created.data["spec"]
    own = copy["metadata"]["uid"]
    assert own != old["metadata"]["uid"]
    assert copy["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": own}}
    template_labels = copy["spec"]["template"]["metadata"]["labels"]
    assert template_labels["controller-uid"] == own and template_labels["job-name"] == "llm-r1"
    assert template_labels[JOB_LABEL] == "llm" and template_labels["role"] == "trainer"


async def test_defect_9_a_job_with_its_own_selector_keeps_it(newer_api: ApiServer) -> None:
    """``manualSelector``: the selector and the template's labels are the author's own."""
    newer_api.objects[JOBS, "ml", "llm"] = failed_job(manual_selector=True)
    jobs = KubernetesJobs(newer_api.client(), clock=lambda: NOW)

    await call(jobs.restart_job, LLM, 1, "platform fault: Xid 79")

    copy = newer_api.objects[JOBS, "ml", "llm-r1"]
    assert copy["spec"]["selector"] == {"matchLabels": {"role": "trainer"}}
    assert copy["spec"]["gangPolicy"] == GANG
