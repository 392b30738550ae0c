"""The job's side of remedy, for a training loop to import: report progress (steps and
checkpoints, which remedy turns into goodput; each rank's step times, from which it finds a
slow node) and answer remedy's checkpoint request before a drain. Standard library only, and
no cluster rights: reports are lines on stdout (the controller reads pods' logs already) and
the request arrives through a downward-API volume of the pod's annotations, which the kubelet
keeps current (docs/jobs.md#the-job-side)."""

from remedy_job.progress import CHECKPOINT_REQUESTED, PREFIX, Reporter

__all__ = ["CHECKPOINT_REQUESTED", "PREFIX", "Reporter"]
