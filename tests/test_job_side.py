"""The job's side, end to end: examples/train/train.py runs as a real process while the test
plays the kubelet (its stdout into the pod's log, the pod's annotations into its downward-API
file). A drain asks it to checkpoint, it checkpoints and acknowledges in its log, the drain
evicts at once, and its reports become goodput."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.kubernetes.drain import CHECKPOINT_REQUESTED
from adapters.kubernetes.job_failures import FailedPods
from adapters.kubernetes.job_times import JobTimesReader
from kubeapi import ApiServer
from remedy.attribution import goodput as gp
from remedy_job import CHECKPOINT_REQUESTED as HELPER_REQUESTED
from remedy_job import PREFIX
from tests.kube import NODES, PODS, call, kube, node, pod
from tests.processes import Children

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "train" / "train.py"


def _training_pod(started: datetime) -> dict[str, Any]:
    labels = {"remedy.io/guard": "true", "batch.kubernetes.io/job-name": "train"}
    obj = pod("train-0", owner="Job", gpus=8, labels=labels)
    obj["status"]["startTime"] = started.isoformat().replace("+00:00", "Z")
    return obj


def _kubelet_logs(api: ApiServer, proc: subprocess.Popen[str]) -> threading.Thread:
    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            key = ("jobs", "train-0")
            api.logs[key] = api.logs.get(key, "") + line

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


async def _until(what: str, holds: Any) -> None:
    for _ in range(3000):  # on state, not on a clock: each turn yields to the drain's thread
        if holds():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def test_the_helper_spells_remedys_names() -> None:
    assert PREFIX == gp.PROGRESS_PREFIX
    assert HELPER_REQUESTED == CHECKPOINT_REQUESTED


async def test_the_example_job_checkpoints_when_asked_and_its_reports_become_goodput(
    api: ApiServer, processes: Children, tmp_path: Path
) -> None:
    api.objects[NODES, None, "n1"] = {
        **node(labels={"remedy.io/pool": "a100"}),
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"nvidia.com/gpu": "8"},
        },
    }
    started = datetime.now(UTC)
    api.objects[PODS, "jobs", "train-0"] = _training_pod(started)
    annotations = tmp_path / "annotations"
    proc = processes.start(
        [
            sys.executable,
            str(TRAIN),
            "--dir",
            str(tmp_path / "ckpt"),
            "--steps",
            "10000000",
            "--every",
            "1000000",
            "--step-s",
            "0.001",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(ROOT), "REMEDY_ANNOTATIONS": str(annotations)},
    )
    _kubelet_logs(api, proc)
    await _until(
        "the job reports it works", lambda: '"resumed"' in api.logs.get(("jobs", "train-0"), "")
    )

    cluster = kube(api, checkpoint_grace_s=300.0)  # the answer must end the wait, not this
    drained = asyncio.create_task(call(cluster.control.drain, "n1", lambda left: None, ""))
    asked = lambda: api.objects[PODS, "jobs", "train-0"]["metadata"].get("annotations", {})  # noqa: E731
    await _until("remedy asks for a checkpoint", lambda: CHECKPOINT_REQUESTED in asked())
    # The kubelet's downward-API volume: key="value" lines, refreshed from the pod.
    request = asked()[CHECKPOINT_REQUESTED]
    annotations.write_text("\n".join(f"{k}={json.dumps(v)}" for k, v in asked().items()) + "\n")
    result = await asyncio.wait_for(drained, timeout=60)
    assert result.startswith("evicted 1 pods")
    proc.terminate()  # the eviction: the kubelet stops the container
    proc.wait(timeout=30)

    reports = gp.parse(api.logs["jobs", "train-0"])
    events = [r.event for r in reports]
    assert events[0] is gp.Event.RESUMED
    [ack] = [r for r in reports if r.event is gp.Event.ACKNOWLEDGED]
    assert ack.request == request
    checkpoint = [r for r in reports if r.event is gp.Event.CHECKPOINT][-1]
    assert checkpoint.step == ack.step and checkpoint.at <= ack.at
    assert (tmp_path / "ckpt" / "checkpoint.json").exists()

    # The pod as the kubelet leaves it, and what remedy makes of it.
    ended = datetime.now(UTC)
    gone = _training_pod(started)
    gone["status"] = {
        **gone["status"],
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "c",
                "ready": False,
                "restartCount": 0,
                "image": "i",
                "imageID": "i",
                "state": {"terminated": {"exitCode": 143, "finishedAt": ended.isoformat()}},
            }
        ],
    }
    api.objects[PODS, "jobs", "train-0"] = gone
    reader = JobTimesReader(FailedPods(api.client(), clock=lambda: ended), clock=lambda: ended)
    [times] = await call(reader.job_times)
    assert (times.job, times.pool) == ("jobs/train", "a100")
    assert await call(reader.pool_gpus) == {"a100": 8}
    job = gp.goodput(gp.summarise(times, ended), ended)
    assert job.checkpoint_step == ack.step  # the work up to the drain was kept
    assert 0 < job.productive_s < job.paid_s
    [pool] = gp.pool_goodput([gp.summarise(times, ended)], {"a100": 8}, ended)
    assert pool.productive_s == job.productive_s
