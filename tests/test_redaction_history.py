"""What a pod's log says reaches workflow histories redacted: a guarded Job's pod dies with a
bearer token, a GitHub token and an e-mail address in its log; the fleet scan fetches the tail
through the Kubernetes adapter (from the API emulator) and hands it to the job's guard. No
payload of the scan's, the guard's or the node's ladder's history holds the raw secrets; the
markers are there instead, for every secret of the corpus (tests/data/secret-corpus.yaml), with
and without the codec (each payload opened with the key, then read)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.jobs import KubernetesJobs
from contract.names import job_guard_workflow_id, remediation_workflow_id
from kubeapi import ApiServer
from remedy.attribution.evidence import RecentXid
from remedy.attribution.guard import JobRef
from tests.conftest import own_fleet, running_workers
from tests.kube import JOBS, NODES, PODS, node
from tests.test_codec import key_line
from tests.test_job_watch import ledger_with, scan
from tests.test_kubernetes_jobs import failed_job, job_pod, xids_annotation
from tests.test_redaction_corpus import SECRETS
from tests.test_secret_histories import opened
from workers.codec import data_converter

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0cmFpbmVyIiwiaWF0IjoxNzAwMDAwMDAwfQ"
    ".c2lnbmF0dXJlLW9mLXRoZS10b2tlbi1oZXJl"
)
GITHUB = "ghp_" + "R3dact3dT0kenF0rTheTestXyz0123456789"
EMAIL = "alice.ml@example.com"
LOG = (
    "step 4100 loss 1.93\n"
    f"fetching s3 shard with header Authorization: Bearer {JWT}\n"
    f"git clone https://{GITHUB}@github.com/acme/llm.git failed; notify {EMAIL}\n"
    + "".join(f"{c.text}\n" for c in SECRETS)  # the corpus: every kind the rules know
    + "RuntimeError: CUDA error: unspecified launch failure\n"
)


async def payloads_of(client: Client, workflow_id: str) -> bytes:
    """Every event of the workflow's history as the server keeps it (payloads as raw bytes),
    and with the codec, every payload opened."""
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError:
        return b""  # never started
    return await opened(client, history)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "codec"])
async def test_a_log_tail_holding_secrets_reaches_the_histories_redacted(
    dev_env: WorkflowEnvironment, api: ApiServer, tmp_path: Path, encrypted: bool
) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(key_line("k1"))
    converter = data_converter(key_file if encrypted else None)
    client = Client(**{**dev_env.client.config(), "data_converter": converter})
    fleet = own_fleet("redact", 1)
    where = sorted(fleet.nodes)[0]
    name = f"llm-{uuid.uuid4().hex[:6]}"
    now = datetime.now(UTC)
    api.objects[NODES, None, where] = node(
        where,
        annotations=xids_annotation(RecentXid(code=79, gpu="SN-9", at=now - timedelta(minutes=1))),
    )
    pod = job_pod(f"{name}-0", where, job=name, started=-60, ended=0)
    pod["status"]["startTime"] = (now - timedelta(hours=1)).isoformat()
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = now.isoformat()
    api.objects[PODS, "ml", f"{name}-0"] = pod
    api.objects[JOBS, "ml", name] = failed_job(name)
    api.logs["ml", f"{name}-0"] = LOG
    scan_id = f"scan-{uuid.uuid4().hex[:8]}"
    async with running_workers(client, fleet, jobs=KubernetesJobs(api.client())) as queues:
        summary = await scan(client, queues, scan_id)
        await ledger_with(client, JobRef(namespace="ml", name=name), 1)
        kept = b"".join(
            [
                await payloads_of(client, scan_id),
                await payloads_of(client, job_guard_workflow_id("ml", name)),
                await payloads_of(client, remediation_workflow_id(where)),
            ]
        )
    assert summary.job_failures_reported == [f"ml/{name}: {name}-0"]
    assert b"unspecified launch failure" in kept  # the log tail is there,
    for secret in (JWT, GITHUB, EMAIL, JWT.split(".")[1], *(c.secret for c in SECRETS)):
        assert secret.encode() not in kept  # and none of its secrets
    for kind in {"authorization", "github-token", "email", *(c.kind for c in SECRETS)}:
        assert f"[REDACTED:{kind}]".encode() in kept
