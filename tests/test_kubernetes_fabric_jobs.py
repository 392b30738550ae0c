"""Fabric tests as Jobs, against the strict API emulator: the Jobs remedy makes (pinned to the
node, all its GPUs, a deadline, never retried), what it reads back from them (the Job's
conditions, the pod's log) and the verdict; a Job past its deadline is a failed test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.kubernetes.fabric_jobs import (
    JOB_LABEL,
    RUN_LABEL,
    FabricImages,
    KubernetesFabricJobs,
    job_names,
)
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused
from remedy.detection.fabric.verdict import BANDWIDTH_LOW, COULD_NOT_RUN, PASSED, FabricTest
from remedy.detection.probe.throughput import load_references
from remedy.scan.fabric import FabricRun, JobState, verdict_of
from tests.kube import JOBS, NODES, PODS, call, node
from tests.test_fabric_parsers import sample

NS = "remedy"
IMAGES = FabricImages(nccl_tests="nccl:1", nvbandwidth="nvb:1", perftest="perftest:1")
LOOPBACK = FabricRun(
    run_id="a1", test=FabricTest.NCCL_LOOPBACK, nodes=["n1"], gpus=8, model="NVIDIA H100 80GB HBM3"
)
PAIR = FabricRun(run_id="p1", test=FabricTest.IB_WRITE_BW, nodes=["n1", "n2"], port_rate_gbps=100)


def jobs(api: ApiServer) -> KubernetesFabricJobs:
    api.objects["v1/namespaces", None, NS] = {"metadata": {"name": NS}}
    return KubernetesFabricJobs(api.client(), NS, IMAGES)


def finish(api: ApiServer, job: str, log: str, *, failed: str = "") -> None:
    """What the Job controller and the kubelet would leave: the Job's condition, its pod's log."""
    done = api.objects[JOBS, NS, job]
    kind = "Failed" if failed else "Complete"
    cond: dict[str, Any] = {"type": kind, "status": "True"}
    if failed:
        cond |= {"reason": failed, "message": "Job was active longer than specified deadline"}
    done["status"] = {"conditions": [cond]}
    done["spec"].pop("selector")  # the server's own: a seed is a new object, it sets it again
    api.objects[JOBS, NS, job] = done
    template = done["spec"]["template"]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-x", "namespace": NS, "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
        "status": {"phase": "Failed" if failed else "Succeeded"},
    }
    api.objects[PODS, NS, f"{job}-x"] = pod
    api.logs[(NS, f"{job}-x")] = log


async def test_the_loopback_job_is_pinned_takes_all_gpus_and_has_a_deadline(
    api: ApiServer,
) -> None:
    api.objects[NODES, "", "n1"] = node("n1", unschedulable=True)  # cordoned for its check

    made = await call(jobs(api).start, LOOPBACK)

    assert made == LOOPBACK
    job = api.objects[JOBS, NS, job_names(LOOPBACK)[0]]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 600)
    assert pod["nodeName"] == "n1" and pod["restartPolicy"] == "Never"
    assert pod["tolerations"] == [{"operator": "Exists"}]
    [container] = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert container["command"][:1] == ["all_reduce_perf"] and container["command"][-2:] == [
        "-g",
        "8",
    ]
    assert job["metadata"]["labels"][RUN_LABEL] == "a1"
    assert spec["template"]["metadata"]["labels"][JOB_LABEL] == job_names(LOOPBACK)[0]


async def test_all_the_nodes_gpus_as_the_node_reports_them(api: ApiServer) -> None:
    gfd = {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    api.objects[NODES, "", "n1"] = node("n1", labels=gfd)
    api.objects[NODES, "", "n2"] = node("n2")

    made = await call(jobs(api).start, LOOPBACK.model_copy(update={"gpus": 0, "model": ""}))

    assert (made.gpus, made.model) == (4, "NVIDIA-H100-80GB-HBM3")
    assert load_references().lookup(made.model).model == "H100 SXM"  # type: ignore[union-attr]
    [container] = api.objects[JOBS, NS, job_names(made)[0]]["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
    with pytest.raises(ActionRefused, match="no GPUs"):
        await call(
            jobs(api).start, LOOPBACK.model_copy(update={"gpus": 0, "model": "", "nodes": ["n2"]})
        )


async def test_starting_twice_makes_the_job_once(api: ApiServer) -> None:
    await call(jobs(api).start, LOOPBACK)
    await call(jobs(api).start, LOOPBACK)

    assert len(list(api.objects.keys(JOBS))) == 1


async def test_a_finished_loopback_is_read_and_judged(api: ApiServer) -> None:
    await call(jobs(api).start, LOOPBACK)
    [name] = job_names(LOOPBACK)
    assert (await call(jobs(api).outcome, LOOPBACK)).state is JobState.RUNNING

    finish(api, name, sample("nccl_loopback_h100.txt"))
    outcome = await call(jobs(api).outcome, LOOPBACK)
    verdict = verdict_of(LOOPBACK, outcome, load_references())

    assert outcome.state is JobState.SUCCEEDED
    assert verdict is not None and verdict.passed and verdict.reason == PASSED
    assert (verdict.figure, verdict.threshold) == (470.63, 150)


async def test_a_job_past_its_deadline_is_a_failed_test(api: ApiServer) -> None:
    await call(jobs(api).start, LOOPBACK)
    [name] = job_names(LOOPBACK)
    half = sample("nccl_loopback_h100.txt").split("    2147483648")[0]
    finish(api, name, half, failed="DeadlineExceeded")

    outcome = await call(jobs(api).outcome, LOOPBACK)
    verdict = verdict_of(LOOPBACK, outcome, load_references())

    assert outcome.state is JobState.TIMED_OUT
    assert verdict is not None and not verdict.passed and verdict.reason == COULD_NOT_RUN
    assert "ran past its 600 s deadline" in verdict.evidence


async def test_a_failed_pod_never_passes_whatever_it_printed(api: ApiServer) -> None:
    await call(jobs(api).start, LOOPBACK)
    [name] = job_names(LOOPBACK)
    finish(api, name, sample("nccl_loopback_h100.txt"), failed="BackoffLimitExceeded")

    verdict = verdict_of(LOOPBACK, await call(jobs(api).outcome, LOOPBACK), load_references())

    assert verdict is not None and verdict.reason == COULD_NOT_RUN
    assert "its pod failed: BackoffLimitExceeded" in verdict.evidence


async def test_a_deleted_job_is_a_failed_test(api: ApiServer) -> None:
    await call(jobs(api).start, LOOPBACK)
    await call(jobs(api).remove, LOOPBACK)

    outcome = await call(jobs(api).outcome, LOOPBACK)

    assert outcome.state is JobState.MISSING
    verdict = verdict_of(LOOPBACK, outcome, load_references())
    assert verdict is not None and not verdict.passed


async def test_an_ib_write_bw_pair_is_a_server_and_a_client_on_the_host_network(
    api: ApiServer,
) -> None:
    api.objects[NODES, "", "n1"] = node("n1")
    server = node("n2")
    server["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.33.3"}]
    api.objects[NODES, "", "n2"] = server

    await call(jobs(api).start, PAIR)
    client_job, server_job = job_names(PAIR)

    client = api.objects[JOBS, NS, client_job]["spec"]["template"]["spec"]
    listener = api.objects[JOBS, NS, server_job]["spec"]["template"]["spec"]
    assert (client["nodeName"], listener["nodeName"]) == ("n1", "n2")
    assert client["hostNetwork"] and listener["hostNetwork"]
    assert "ib_write_bw -d mlx5_0 --report_gbits" in client["containers"][0]["command"][-1]
    assert "10.0.33.3" in client["containers"][0]["command"][-1]
    assert client["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]

    finish(api, server_job, "")
    finish(api, client_job, sample("ib_write_bw_roce.txt"))
    verdict = verdict_of(PAIR, await call(jobs(api).outcome, PAIR), load_references())
    assert verdict is not None and verdict.passed and verdict.unit == "Gb/s"

    slow = PAIR.model_copy(update={"port_rate_gbps": 400.0})
    verdict = verdict_of(slow, await call(jobs(api).outcome, slow), load_references())
    assert verdict is not None and verdict.reason == BANDWIDTH_LOW


async def test_a_pair_whose_server_node_has_no_address_is_refused(api: ApiServer) -> None:
    api.objects[NODES, "", "n2"] = node("n2")

    with pytest.raises(ActionRefused, match="no InternalIP"):
        await call(jobs(api).start, PAIR)


def test_a_pair_is_two_different_nodes_and_a_loopback_one() -> None:
    with pytest.raises(ValueError, match="two different nodes"):
        FabricRun(run_id="x", test=FabricTest.IB_WRITE_BW, nodes=["n1", "n1"], port_rate_gbps=1)
    with pytest.raises(ValueError, match="runs on one"):
        FabricRun(run_id="x", test=FabricTest.NCCL_LOOPBACK, nodes=["n1", "n2"])
    assert LOOPBACK.deadline == timedelta(minutes=10)
