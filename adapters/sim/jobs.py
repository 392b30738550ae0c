"""Guarded jobs in the simulation: restarts and stops are recorded, failures are what a test puts
there or what a fault on a running job's node causes, and no restart fails unless told to."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from adapters.sim.ranks import Pace, printed, rank_lines
from remedy.attribution.elastic import ElasticRange, JobShape
from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.goodput import Event, JobTimes, PodTime, Progress
from remedy.attribution.guard import JobRef
from remedy.attribution.jobs import JobState
from remedy.attribution.model import PodFailure, Termination, XidSeen
from remedy.core.errors import ActionFailed, ActionRefused, PermissionDenied
from remedy.core.models import Finding

# What each rank's log ends with: the rank on the faulty GPU, and the ranks left waiting on it.
CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
NCCL_TIMEOUT = (
    "[Rank {rank}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=4242, OpType=ALLREDUCE) ran for 600000 milliseconds"
)


def _now() -> datetime:
    return datetime.now(UTC)


class _Run:
    """One incarnation of a job: its ranks' nodes, from when, until when, how it ended."""

    def __init__(self, nodes: list[str], at: datetime) -> None:
        self.nodes, self.started_at = nodes, at
        self.ended_at: datetime | None = None
        self.succeeded = False


class SimJobs:
    def __init__(
        self,
        clock: Callable[[], datetime] = _now,
        checkpoint_every: timedelta = timedelta(seconds=10),
    ) -> None:
        self._lock = threading.Lock()
        # Pod times and progress: each job's runs, its loop checkpointing every
        # ``checkpoint_every`` (a second's write); the pools' GPUs (a demo sets them).
        self._clock, self.checkpoint_every = clock, checkpoint_every
        self.runs: dict[str, list[_Run]] = {}
        self.pool, self.pools = "default", dict[str, int]()
        self.gpus_per_node = 8
        self.restarts: list[tuple[str, str]] = []  # (namespace/name, reason)
        self.stops: list[tuple[str, str]] = []
        self.broken: set[str] = set()  # jobs whose restart fails
        self.forbidden = False  # listing failures is refused (a missing RBAC rule)
        self.states: dict[str, JobState] = {}  # by namespace/name; absent: running
        self.failures: list[GuardedFailure] = []  # failed pods not yet reported
        self.reported: dict[str, str] = {}  # pod uid → the guard that has it
        self._attempts: set[tuple[str, int]] = set()
        self.running: dict[JobRef, list[str]] = {}  # lockstep jobs → the nodes of their ranks
        # Elastic restarts: each job's range and size, the pods capacity holds (what a test
        # sets), whether its pods acknowledge a checkpoint, and the sizes it was started at.
        self.elastic: dict[str, ElasticRange] = {}
        self.sizes: dict[str, int] = {}
        self.fits = 0
        self.acknowledges = True
        self.checkpoints: list[tuple[str, datetime]] = []
        self.started_at: list[tuple[str, int]] = []  # (job, size) per restart that set one
        # The fleet under the jobs (adapters/sim/provider.py wires it): its GPUs' UUIDs and
        # slowness for the ranks' step times, which nodes a new run may use, the spare nodes a
        # run takes in place of one it may not, and whether ``fits`` is theirs, not a test's.
        self.pace = Pace()
        self.placeable: Callable[[str], bool] = lambda node: True
        self.spares: list[str] = []
        self.fits_from_fleet = False
        # Each pod's rank reports printed so far (its periods, its log tail): a line once
        # printed stays as it was, and a scan reads only the new ones.
        self._printed: dict[tuple[str, datetime, str], tuple[int, list[Progress]]] = {}
        self._printing = threading.Lock()

    def launch(self, job: JobRef, nodes: list[str]) -> None:
        """A lockstep training job with one rank per node."""
        with self._lock:
            self.running[job] = nodes
            self.states[str(job)] = JobState.RUNNING
            self.runs.setdefault(str(job), []).append(_Run(nodes, self._clock()))

    def finish(self, job: JobRef) -> None:
        """The job completed: its run ends, succeeded."""
        with self._lock:
            self.states[str(job)] = JobState.SUCCEEDED
            self._end_run(str(job), self._clock(), succeeded=True)

    def _end_run(self, key: str, at: datetime, *, succeeded: bool = False) -> None:
        runs = self.runs.get(key, [])
        if runs and runs[-1].ended_at is None:
            runs[-1].ended_at, runs[-1].succeeded = at, succeeded

    def fault(self, finding: Finding) -> list[JobRef]:
        """A fault on a node a running job uses ends every rank of it: the rank on that node
        with the fault's own evidence, the others stalled in a collective. The failures wait
        for the job watch, with what it would gather (the fault seen on the job's nodes)."""
        if finding.xid is None or not finding.unhealthy:  # an Xid ends the CUDA context
            return []
        hit = []
        with self._lock:
            for job, nodes in self.running.items():
                if finding.node not in nodes or self.states.get(str(job)) is not JobState.RUNNING:
                    continue
                self.states[str(job)] = JobState.FAILED
                self._end_run(str(job), finding.observed_at)
                hit.append(job)
                run = sum(1 for key, _ in self.restarts if key == str(job))
                xids = [
                    XidSeen(
                        code=finding.xid,
                        gpu=finding.component.serial or "?",
                        node=finding.node,
                        at=finding.observed_at,
                        process="python",
                        job=str(job),
                        action=finding.nvidia_action,
                    )
                ]
                own = PodFailure(
                    job=str(job),
                    pod="",
                    node=finding.node,
                    failed_at=finding.observed_at,
                    termination=Termination(exit_code=1, reason="Error"),
                    log_tail=CUDA_ERROR,
                    findings=[finding],
                    xids=xids,
                )
                self._ranks_fail(job, nodes, finding.node, run, own)
        return hit

    def evicted(self, node: str) -> list[JobRef]:
        """A drain evicted ``node``'s pods: a running job whose newest run has a pod there
        fails, that pod evicted (what a drain's eviction leaves on it), its other ranks stalled
        in a collective. Called after the drain, outside the fleet's lock."""
        hit = []
        with self._lock:
            now = self._clock()
            for job in list(self.running):
                runs = self.runs.get(str(job), [])
                if self.states.get(str(job)) is not JobState.RUNNING or not runs:
                    continue
                if runs[-1].ended_at is not None or node not in runs[-1].nodes:
                    continue
                self.states[str(job)] = JobState.FAILED
                self._end_run(str(job), now)
                hit.append(job)
                run = sum(1 for key, _ in self.restarts if key == str(job))
                eviction = Termination(reason="Evicted", disruption="EvictionByEvictionAPI")
                own = PodFailure(
                    job=str(job), pod="", node=node, failed_at=now, termination=eviction
                )
                self._ranks_fail(job, runs[-1].nodes, node, run, own)
        return hit

    def _ranks_fail(
        self, job: JobRef, nodes: list[str], culprit: str, run: int, own: PodFailure
    ) -> None:
        """Every pod of the run fails: the one on ``culprit`` as ``own`` says, the others a
        second later in the collective it left (under the lock)."""
        for rank, node in enumerate(nodes):
            pod = f"{job.name}-{run}-{rank}"
            failure = own.model_copy(update={"pod": pod, "node": node})
            if node != culprit:
                failure = failure.model_copy(
                    update={
                        "failed_at": own.failed_at + timedelta(seconds=1),
                        "termination": Termination(exit_code=1, reason="Error"),
                        "log_tail": NCCL_TIMEOUT.format(rank=rank),
                    }
                )
            self.failures.append(
                GuardedFailure(job=job, pod_uid=pod, job_nodes=nodes, failure=failure)
            )

    def restart_job(
        self,
        job: JobRef,
        attempt: int,
        reason: str,
        resumed_by: str | None = None,
        *,
        size: int | None = None,
        grow: bool = False,
    ) -> str:
        key = str(job)
        with self._lock:
            if key in self.broken:
                raise ActionFailed(f"job {key} could not be restarted")
            if self.states.get(key) is JobState.SUSPENDED and resumed_by is None:
                raise ActionRefused(f"job {key} was stopped by remedy: a person resumes it")
            if (key, attempt) not in self._attempts:  # a retried activity restarts once
                self._attempts.add((key, attempt))
                self.restarts.append((key, reason))
                if size is not None:
                    self.sizes[key] = size
                    self.started_at.append((key, size))
                self._rerun(job, size)
            self.states[key] = JobState.RUNNING
            return f"{key} restarted ({attempt})"

    def job_shape(self, job: JobRef) -> JobShape:
        with self._lock:
            key = str(job)
            size = self.sizes.get(key, len(self.running.get(job, [])))
            fits = len(self._candidates(job)) if self.fits_from_fleet else self.fits
            return JobShape(elastic=self.elastic.get(key), size=size, fits=fits)

    def checkpoint_job(self, job: JobRef, asked_at: datetime) -> bool:
        with self._lock:
            self.checkpoints.append((str(job), asked_at))
            return self.acknowledges

    def stop_job(self, job: JobRef, reason: str) -> str:
        with self._lock:
            self.stops.append((str(job), reason))
            self.states[str(job)] = JobState.SUSPENDED
            self._end_run(str(job), self._clock())
            return f"{job} suspended"

    def _rerun(self, job: JobRef, size: int | None) -> None:
        """A restart's new run, on the job's nodes the scheduler may use, then spares (its
        first ``size`` of them): a cordoned node is left out, a spare swapped in."""
        runs, now = self.runs.get(str(job)), self._clock()
        if not runs:
            return
        self._end_run(str(job), now)
        nodes = self._candidates(job) or runs[-1].nodes
        runs.append(_Run(nodes[: size or len(self.running.get(job, nodes))], now))

    def _candidates(self, job: JobRef) -> list[str]:
        home = self.running.get(job, [])
        taken = {n for other, nodes in self.running.items() if other != job for n in nodes}
        spares = [n for n in self.spares if n not in home and n not in taken]
        return [n for n in [*home, *spares] if self.placeable(n)]

    # -- goodput: pod times and the loop's reports ------------------------------------------
    def job_times(self) -> list[JobTimes]:
        with self._lock:
            now = self._clock()
            runs = {key: list(runs) for key, runs in sorted(self.runs.items())}
        # Outside the jobs' lock: the ranks' lines read the fleet's, under its own.
        return [
            JobTimes(job=key, pool="default", pods=[p for r in rs for p in self._pods(key, r, now)])
            for key, rs in runs.items()
        ]

    def skew(self, node: str, seconds: float) -> None:
        """The job's input on ``node`` comes ``seconds`` a step late (an application cause)."""
        self.pace.input_skew[node] = seconds

    def _ranks(self, key: str, run: _Run, place: int, node: str, until: datetime) -> list[Progress]:
        pod, pace = (key, run.started_at, node), self.pace
        with self._printing:
            done, kept = self._printed.get(pod, (0, []))
            periods = printed(run.started_at, until, pace)
            if periods <= done:
                return kept
            lines = rank_lines(
                key,
                node,
                place,
                self.gpus_per_node,
                run.started_at,
                until,
                pace,
                self.checkpoint_every,
                after=done,
            )
            new = [Progress.model_validate(line) for line in lines]
            ranks = len(lines) // max(1, min(periods - done, pace.tail))
            kept = [*kept, *new][-pace.tail * ranks :]
            self._printed[pod] = (periods, kept)
            return kept

    def _pods(self, key: str, run: _Run, now: datetime) -> list[PodTime]:
        """One pod per node; rank 0 reports the checkpoints for all (they move together), each
        pod its own ranks' step times."""
        until = run.ended_at or now
        reports = [Progress(event=Event.RESUMED, at=run.started_at)]
        at, step = run.started_at + self.checkpoint_every, 0
        while at <= until:
            step += 100
            reports.append(Progress(event=Event.CHECKPOINT, at=at, step=step, seconds=1.0))
            at += self.checkpoint_every
        name = key.split("/", 1)[-1]
        return [
            PodTime(
                pod=f"{name}-{run.started_at:%H%M%S%f}-{rank}",
                node=node,
                gpus=self.gpus_per_node,
                started_at=run.started_at,
                ended_at=run.ended_at,
                succeeded=run.succeeded,
                progress=[
                    *(reports if rank == 0 else []),
                    *self._ranks(key, run, rank, node, until),
                ],
            )
            for rank, node in enumerate(run.nodes)
        ]

    def pool_gpus(self) -> dict[str, int]:
        with self._lock:
            nodes = {n for runs in self.runs.values() for r in runs for n in r.nodes}
            return self.pools or {self.pool: len(nodes) * self.gpus_per_node}

    def failed_pods(self) -> list[GuardedFailure]:
        if self.forbidden:
            raise PermissionDenied("forbidden: remedy needs RBAC 'list' on pods")
        with self._lock:
            return [f for f in self.failures if f.pod_uid not in self.reported]

    def mark_reported(self, failure: GuardedFailure, guard: str) -> None:
        with self._lock:
            self.reported[failure.pod_uid] = guard

    def job_state(self, job: JobRef) -> JobState:
        with self._lock:
            return self.states.get(str(job), JobState.RUNNING)
