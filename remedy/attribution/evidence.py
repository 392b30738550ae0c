"""Evidence for attribution that the cluster holds: the Xids each node's agent keeps on its node,
and which job's pod had the GPUs when an Xid was raised. Pure: adapters read and write it."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from remedy.attribution.guard import GuardPolicy, JobRef
from remedy.attribution.model import PodFailure, XidSeen
from remedy.core.models import Finding, Wraps

KEEP_XIDS = 32  # per node: enough for a week of a flaky GPU, small enough for an annotation
KEEP_FOR = timedelta(days=7)


class RecentXid(BaseModel):
    """One Xid as the agent keeps it on its node (the ``remedy.io/recent-xids`` annotation)."""

    model_config = ConfigDict(frozen=True)

    code: int
    gpu: str  # serial, else UUID, else PCI bus id: the same physical GPU across jobs
    at: datetime
    pid: int | None = None
    process: str | None = None
    # NVIDIA's action as the line said it (Xid 154 "None" is ignore, not the catalog's
    # contact_support): the job guard tells the job's own Xids from the GPU's by it.
    action: str | None = None


def recent_xid(finding: Finding) -> RecentXid | None:
    """An Xid finding as the node keeps it; None for any other finding."""
    if finding.xid is None:
        return None
    gpu = finding.component
    return RecentXid(
        code=finding.xid,
        at=finding.observed_at,
        pid=finding.pid,
        process=finding.process,
        action=finding.nvidia_action,
        gpu=gpu.serial or gpu.uuid or gpu.pci_bus_id or f"index {gpu.index}",
    )


def remember(kept: list[RecentXid], new: list[RecentXid], now: datetime) -> list[RecentXid]:
    """The node's list with ``new`` added: oldest first, a week at most, ``KEEP_XIDS`` at
    most, each Xid once (NVML and the kernel log may both report it)."""
    merged = sorted({*kept, *new}, key=lambda x: (x.at, x.code, x.gpu, x.pid or 0))
    return [x for x in merged if x.at >= now - KEEP_FOR][-KEEP_XIDS:]


class PodRun(BaseModel):
    """A pod that ran on a node: when, with how many GPUs, for which job."""

    job: str | None  # "namespace/name" of its job; None for a pod of no job
    gpus: int
    started_at: datetime | None
    ended_at: datetime | None = None  # None: still running


def tie_xids(node: str, xids: list[RecentXid], pods: list[PodRun]) -> list[XidSeen]:
    """The node's Xids, each tied to the job whose pod held the node's GPUs at that moment.

    Tied only when exactly one GPU pod ran then: a training pod that takes the whole node (the
    common case) owns every Xid raised during its run. On a node shared by several GPU pods the
    Xid stays untied, since which GPU a pod got is the device plugin's secret."""
    out = []
    for xid in xids:
        running = {
            p.job
            for p in pods
            if p.gpus > 0
            and p.started_at is not None
            and p.started_at <= xid.at
            and (p.ended_at is None or xid.at <= p.ended_at)
        }
        job = running.pop() if len(running) == 1 else None
        out.append(
            XidSeen(
                code=xid.code,
                gpu=xid.gpu,
                node=node,
                at=xid.at,
                pid=xid.pid,
                process=xid.process,
                job=job,
                action=xid.action,
            )
        )
    return out


class GuardedFailure(BaseModel):
    """A failed pod of a guarded job, with what the cluster knows of it, for its guard."""

    job: JobRef
    pod_uid: str
    failure: PodFailure
    job_nodes: list[str] = []  # the nodes the job's pods ran on (where ladders count too)


class GuardedFailures(Wraps):
    failures: list[GuardedFailure]


class FinishedGuards(Wraps):
    """The jobs whose guards were told their job finished."""

    jobs: list[str]


class JobFailureReport(BaseModel):
    """Hand a failure to its job's guard (signal-with-start: the first failure starts it)."""

    failure: GuardedFailure
    policy: GuardPolicy = GuardPolicy()
    controller_task_queue: str
    node_task_queue: str = ""  # "": each blamed node's own agent queue
