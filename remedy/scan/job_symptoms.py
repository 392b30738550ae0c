"""A guarded job's own symptoms, from the progress lines its ranks print (remedy_job/ranks.py)
in the logs the job watch reads already: each rank's step times placed on its pod's node, the
NVRx scores and the NCCL timeouts its rank 0 reports, and the straggler detector's verdict on
each job (remedy/detection/stragglers/scores.py). Pure: the time comes in as ``now``."""

from __future__ import annotations

from datetime import datetime

from remedy.attribution.goodput import Event, JobTimes
from remedy.detection.stragglers.models import (
    CollectiveTimeout,
    NvrxScores,
    RankSample,
    StragglerPolicy,
    StragglerReport,
)
from remedy.detection.stragglers.scores import judge

# A rank line's fields as the detector's sample keeps them (the same names on both sides).
RANK_FIELDS = {"rank", "local_rank", "gpu", "at", "step", "steps", "compute_s", "data_s"}


def symptoms(
    times: JobTimes,
) -> tuple[list[RankSample], list[NvrxScores], list[CollectiveTimeout]]:
    """Each rank's summaries on the node its pod ran on (the pod's placement: a rank is where
    its process is), with the job's NVRx scores and collective timeouts, oldest first. A rank
    line of a pod that has no node yet is skipped: it cannot be blamed on anything."""
    samples, nvrx, timeouts = [], [], []
    for pod in times.pods:
        for p in pod.progress:
            if p.event is Event.RANK and p.rank is not None and pod.node:
                own = p.model_dump(include=RANK_FIELDS)
                samples.append(RankSample(node=pod.node, pod=pod.pod, **own))
            elif p.event is Event.NVRX:
                nvrx.append(NvrxScores(**p.model_dump(include={"at", "relative", "individual"})))
            elif p.event is Event.NCCL_TIMEOUT:
                fields = {"at", "collective", "missing_ranks"}
                timeouts.append(CollectiveTimeout(**p.model_dump(include=fields)))
    return (
        sorted(samples, key=lambda s: s.at),
        sorted(nvrx, key=lambda s: s.at),
        sorted(timeouts, key=lambda s: s.at),
    )


def judge_jobs(
    times: list[JobTimes],
    now: datetime,
    policy: StragglerPolicy = StragglerPolicy(),  # noqa: B008 (frozen: one shared default)
) -> list[StragglerReport]:
    """The detector's verdict on each job, in the order given (a job with no rank lines is
    not judged, and says so)."""
    reports = []
    for t in times:
        samples, nvrx, timeouts = symptoms(t)
        reports.append(judge(samples, now, t.job, policy, nvrx=nvrx, timeouts=timeouts))
    return reports
