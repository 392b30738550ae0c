"""Elastic restarts on Kubernetes Jobs, the real client against the API emulator: how many pods
of a job the healthy nodes hold, the copy at the size that allows, and a grow that ends the
running copy only once its pods acknowledged a checkpoint."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from adapters.kubernetes.drain import CHECKPOINT_REQUESTED, CHECKPOINTED
from adapters.kubernetes.job_failures import JOB_LABEL
from adapters.kubernetes.job_sizes import RESIZED
from adapters.kubernetes.jobs import RESTART_ATTEMPT, RESTART_SIZE, KubernetesJobs
from kubeapi import ApiServer
from remedy.attribution.elastic import ELASTIC, ElasticRange, JobShape
from remedy.core.errors import ActionRefused
from tests.kube import JOBS, NODES, PODS, call, node, sent
from tests.test_kubernetes_jobs import LLM, NOW, failed_job, job_pod


@pytest.fixture
def jobs(api: ApiServer) -> KubernetesJobs:
    return KubernetesJobs(api.client(), clock=lambda: NOW)


def elastic_job(name: str = "llm", size: int = 4, **options: Any) -> dict[str, Any]:
    """An Indexed Job of ``size`` ranks, 8 GPUs each, that runs at 2 to 4 nodes."""
    job = failed_job(name, **options)
    job["metadata"]["annotations"][ELASTIC] = "2:4"
    job["spec"] |= {"completionMode": "Indexed", "completions": size, "parallelism": size}
    pod_spec = job["spec"]["template"]["spec"]
    pod_spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    pod_spec["nodeSelector"] = {"pool": "h100"}
    return job


def gpu_node(name: str, **options: Any) -> dict[str, Any]:
    found = node(name, labels={"pool": "h100"}, **options)
    found["status"]["allocatable"] = {"nvidia.com/gpu": "8"}
    return found


def spares_short(api: ApiServer) -> None:
    """Six nodes of the pool and one elsewhere; two of the pool can take a rank."""
    sick = gpu_node("n1")
    sick["status"]["conditions"].append({"type": "GpuProblem", "status": "True"})
    api.objects[NODES, None, "n1"] = sick
    api.objects[NODES, None, "n2"] = gpu_node("n2", unschedulable=True)  # cordoned
    api.objects[NODES, None, "n3"] = gpu_node("n3")
    api.objects[NODES, None, "n4"] = gpu_node("n4")
    api.objects[NODES, None, "n5"] = gpu_node("n5")  # busy with another job
    api.objects[NODES, None, "n6"] = gpu_node(
        "n6", taints=[{"key": "remedy.io/quarantine", "effect": "NoSchedule"}]
    )
    api.objects[NODES, None, "cpu"] = node("cpu")  # not the job's pool
    # The job's own failed ranks leave their nodes free; another job's running pod does not.
    api.objects[PODS, "ml", "llm-0"] = job_pod("llm-0", "n3")
    api.objects[PODS, "ml", "llm-1"] = job_pod("llm-1", "n4")
    api.objects[PODS, "ml", "web-0"] = job_pod(
        "web-0", "n5", job="web", phase="Running", exit_code=None
    )


async def test_an_elastic_job_restarts_at_the_size_healthy_nodes_hold(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    spares_short(api)
    api.objects[JOBS, "ml", "llm"] = elastic_job()

    shape = await call(jobs.job_shape, LLM)
    await call(partial(jobs.restart_job, size=shape.fits), LLM, 1, "platform fault: Xid 79")

    assert shape == JobShape(elastic=ElasticRange(min=2, max=4), size=4, fits=2)
    [created] = sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs")
    copy = created.data
    assert copy["metadata"]["name"] == "llm-r1"
    assert (copy["spec"]["parallelism"], copy["spec"]["completions"]) == (2, 2)
    assert copy["metadata"]["annotations"][RESTART_SIZE] == "2"


async def test_a_fixed_size_job_reports_no_range_and_restarts_as_it_was(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    spares_short(api)
    fixed = elastic_job()
    del fixed["metadata"]["annotations"][ELASTIC]
    api.objects[JOBS, "ml", "llm"] = fixed

    shape = await call(jobs.job_shape, LLM)
    await call(jobs.restart_job, LLM, 1, "platform fault: Xid 79")

    assert shape == JobShape(size=4)
    [created] = sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs")
    assert (created.data["spec"]["parallelism"], created.data["spec"]["completions"]) == (4, 4)


async def test_a_torchrun_range_is_read_and_a_broken_annotation_refused(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    spares_short(api)
    job = elastic_job()
    del job["metadata"]["annotations"][ELASTIC]
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["torchrun", "--nnodes=1:3"]
    api.objects[JOBS, "ml", "llm"] = job
    assert (await call(jobs.job_shape, LLM)).elastic == ElasticRange(min=1, max=3)

    job["metadata"]["annotations"][ELASTIC] = "four"
    api.objects[JOBS, "ml", "llm"] = job
    with pytest.raises(ActionRefused, match="is not MIN:MAX"):
        await call(jobs.job_shape, LLM)


async def test_a_grow_waits_for_the_checkpoint_then_starts_a_larger_copy(
    api: ApiServer, jobs: KubernetesJobs
) -> None:
    for name in ("n3", "n4", "n5", "n6"):
        api.objects[NODES, None, name] = gpu_node(name)
    running = elastic_job("llm-r1", size=2, conditions=[], annotations={RESTART_ATTEMPT: "1"})
    running["metadata"]["labels"][JOB_LABEL] = "llm"
    api.objects[JOBS, "ml", "llm"] = elastic_job()
    api.objects[JOBS, "ml", "llm-r1"] = running
    for rank, on in enumerate(("n3", "n4")):
        pod = f"llm-r1-{rank}"
        api.objects[PODS, "ml", pod] = job_pod(
            pod, on, job="llm-r1", phase="Running", exit_code=None
        )

    assert (await call(jobs.job_shape, LLM)).model_dump() == {
        "elastic": {"min": 2, "max": 4},
        "size": 2,
        "fits": 4,  # its own running ranks make way
    }
    asked = await call(jobs.checkpoint_job, LLM, NOW)
    notes = api.objects[PODS, "ml", "llm-r1-0"]["metadata"]["annotations"]
    assert not asked and notes[CHECKPOINT_REQUESTED] == NOW.isoformat()
    for rank in (0, 1):  # the training loop checkpointed and answered
        answered = api.objects[PODS, "ml", f"llm-r1-{rank}"]
        answered["metadata"]["annotations"][CHECKPOINTED] = "t"
        api.objects[PODS, "ml", f"llm-r1-{rank}"] = answered
    assert await call(jobs.checkpoint_job, LLM, NOW)

    await call(partial(jobs.restart_job, size=4, grow=True), LLM, 2, "capacity returned")

    ended = api.objects[JOBS, "ml", "llm-r1"]
    assert ended["spec"]["suspend"] is True
    assert ended["metadata"]["annotations"][RESIZED] == "capacity returned"
    [created] = sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs")
    assert created.data["metadata"]["name"] == "llm-r2"
    assert created.data["spec"]["parallelism"] == 4
    assert RESIZED not in created.data["metadata"]["annotations"]
