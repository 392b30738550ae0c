"""When each guarded job's pods ran, on how many GPUs, and what their training loops reported
in their logs (remedy_job's progress lines): the raw material of goodput. Reads only what the
job watch reads already (pods, their logs, nodes)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.fleet import POOL_LABEL
from adapters.kubernetes.job_failures import FailedPods, job_of, succeeded, termination
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.objects import Json, gpu_count, meta, timestamp
from remedy.attribution.goodput import JobTimes, PodTime, parse
from remedy.core.errors import RemedyError

log = logging.getLogger(__name__)

# Of each pod's log. A pod of 8 ranks prints about 10 lines a minute (each rank's step times,
# rank 0's step and NVRx scores) and its checkpoints: ~610 an hour. Goodput needs the last
# checkpoint still in the tail, the straggler detector its window and some history: 1,000
# lines keep ~1 h 40 min of such a pod (~150 KB a read).
PROGRESS_LINES = 1000


class JobTimesReader:
    def __init__(self, pods: FailedPods, clock: Callable[[], datetime]) -> None:
        self._pods, self._clock = pods, clock

    def job_times(self) -> list[JobTimes]:
        pools = {name: pool for name, pool, _ in self._nodes()}
        jobs: dict[str, JobTimes] = {}
        for pod in self._pods.guarded_pods(None):
            job, started = job_of(pod), timestamp(pod.get("status", {}).get("startTime"))
            if job is None or started is None:
                continue  # never started: neither paid nor productive
            node = pod.get("spec", {}).get("nodeName") or ""
            times = jobs.setdefault(str(job), JobTimes(job=str(job), pool=pools.get(node, "")))
            times.pods.append(self._pod_time(pod, node, started))
        return sorted(jobs.values(), key=lambda j: j.job)

    def pool_gpus(self) -> dict[str, int]:
        gpus: dict[str, int] = {}
        for _, pool, count in self._nodes():
            gpus[pool] = gpus.get(pool, 0) + count
        return gpus

    def _nodes(self) -> list[tuple[str, str, int]]:
        listed = list_pages(self._pods.core.list_node, what="nodes")
        return [
            (
                meta(n)["name"],
                meta(n).get("labels", {}).get(POOL_LABEL, "default"),
                int(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", 0)),
            )
            for n in listed
        ]

    def _pod_time(self, pod: Json, node: str, started: datetime) -> PodTime:
        phase = pod.get("status", {}).get("phase")
        ended = termination(pod)[2] or self._clock() if phase in ("Succeeded", "Failed") else None
        return PodTime(
            pod=meta(pod)["name"],
            node=node,
            gpus=gpu_count(pod),
            started_at=started,
            ended_at=ended,
            succeeded=succeeded(pod),
            progress=parse(self._log(pod)),
        )

    def _log(self, pod: Json) -> str:
        containers = pod.get("spec", {}).get("containers", [])
        try:
            with api_errors("get", "pods/log"):
                return str(
                    self._pods.core.read_namespaced_pod_log(
                        meta(pod)["name"],
                        meta(pod)["namespace"],
                        container=containers[0]["name"] if containers else None,
                        tail_lines=PROGRESS_LINES,
                    )
                )
        except RemedyError as exc:
            log.info("no log for %s: %s", meta(pod)["name"], exc)
            return ""
