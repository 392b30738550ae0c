"""What a job guard does with an attributed failure, and the job's ledger of time lost.

PLATFORM → restart from the last checkpoint, with backoff, at most ``max_platform_restarts``
times; APPLICATION → stop (a retry would fail the same way); UNKNOWN → one retry, then hold the
job for a human. Pure: the JobGuard workflow keeps the ledger and acts on the decision."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from remedy.attribution.elastic import ElasticPolicy, JobShape
from remedy.attribution.goodput import JobEnd, JobGoodput
from remedy.attribution.model import Attribution, Verdict
from remedy.attribution.suspicions import Suspicion, SuspicionPolicy
from remedy.core.models import NodeRef, Wraps, signed
from remedy.detection.stragglers.models import StragglerReport


class GuardAction(StrEnum):
    RESTART = "restart"
    STOP = "stop"  # the application's fault: no restart
    HOLD = "hold"  # a cap is reached, or unknown twice: a human decides
    JOINED = "joined"  # another pod of a failure already acted on (lockstep ranks fail together)


class GuardPolicy(BaseModel):
    # A failure is judged once its peers had this long to arrive: the ranks of a lockstep job
    # end together, and the pod that explains the failure may be reported last.
    gather: timedelta = timedelta(seconds=30)
    max_platform_restarts: int = Field(default=5, ge=0)
    max_unknown_retries: int = Field(default=1, ge=0)
    backoff_initial: timedelta = timedelta(minutes=1)
    backoff_coefficient: float = Field(default=2.0, ge=1.0)
    backoff_max: timedelta = timedelta(minutes=30)
    # Slow-node suspicions (remedy/attribution/suspicions.py): expiry, quiet, ladder polling.
    suspicions: SuspicionPolicy = SuspicionPolicy()

    def backoff(self, restarts_so_far: int) -> timedelta:
        delay = self.backoff_initial * self.backoff_coefficient**restarts_so_far
        return min(delay, self.backoff_max)


class Decision(BaseModel):
    action: GuardAction
    delay: timedelta = timedelta(0)  # before the restart
    reason: str


class Failure(BaseModel):
    at: datetime
    pod: str
    attribution: Attribution
    lost: timedelta  # training time lost (since the last checkpoint, and until it runs again)
    decision: Decision


class Resize(BaseModel):
    """An elastic job restarted at another size."""

    at: datetime
    size: int
    reason: str
    grow: bool = False  # capacity returned (not a failure's restart)


class JobLedger(BaseModel):
    """Every failure of one guarded job, and the time lost per verdict."""

    job: str
    failures: list[Failure] = []
    restarted_at: datetime | None = None  # a pod that failed before this was of an older run
    shape: JobShape | None = None  # an elastic job's range and size, as of its last restart
    resizes: list[Resize] = []
    goodput: JobGoodput | None = None  # as the fleet scan last measured it
    end: JobEnd | None = None  # how the job ended (the guard's end)
    suspicions: list[Suspicion] = []  # slow-node suspects and what became of each

    @property
    def attempts(self) -> int:
        """Restarts so far, grows included: each makes a new incarnation of the job."""
        restarts = sum(1 for f in self.failures if f.decision.action is GuardAction.RESTART)
        return restarts + sum(1 for r in self.resizes if r.grow)

    def sized(self, at: datetime, size: int, reason: str, *, grow: bool = False) -> None:
        """The job now runs at ``size``: recorded when the size changed."""
        shape = self.shape
        if shape is not None and shape.size != size:
            self.resizes = [*self.resizes, Resize(at=at, size=size, reason=reason, grow=grow)]
        if shape is not None:
            self.shape = shape.model_copy(update={"size": size})

    def count(self, verdict: Verdict, action: GuardAction | None = None) -> int:
        """Failures acted on (the pods that joined one are not counted again)."""
        return sum(
            1
            for f in self.failures
            if f.attribution.verdict is verdict
            and (
                f.decision.action is action
                if action
                else f.decision.action is not GuardAction.JOINED
            )
        )

    def lost(self, verdict: Verdict) -> timedelta:
        return sum(
            (f.lost for f in self.failures if f.attribution.verdict is verdict), timedelta(0)
        )

    def decide(self, attribution: Attribution, policy: GuardPolicy) -> Decision:
        restarts = sum(1 for f in self.failures if f.decision.action is GuardAction.RESTART)
        match attribution.verdict:
            case Verdict.APPLICATION:
                return Decision(
                    action=GuardAction.STOP,
                    reason=f"the application's fault ({attribution.rule}): a "
                    "restart would fail the same way",
                )
            case Verdict.PLATFORM:
                done = self.count(Verdict.PLATFORM, GuardAction.RESTART)
                if done >= policy.max_platform_restarts:
                    return Decision(
                        action=GuardAction.HOLD,
                        reason=f"{done} platform restarts already, the cap: a human decides",
                    )
                return Decision(
                    action=GuardAction.RESTART,
                    delay=policy.backoff(restarts),
                    reason=f"platform fault ({attribution.rule}): restart "
                    f"{done + 1} of {policy.max_platform_restarts}",
                )
            case _:
                done = self.count(Verdict.UNKNOWN, GuardAction.RESTART)
                if done >= policy.max_unknown_retries:
                    return Decision(
                        action=GuardAction.HOLD, reason="unknown cause again: held for a human"
                    )
                return Decision(
                    action=GuardAction.RESTART,
                    delay=policy.backoff(restarts),
                    reason=f"unknown cause ({attribution.rule}): one retry",
                )

    def record(self, failure: Failure) -> None:
        self.failures = [*self.failures, failure]


class JobRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    namespace: str = "default"
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class GuardPhase(StrEnum):
    WATCHING = "watching"  # the job runs; failures are attributed as they come
    RESTARTING = "restarting"  # waiting out the backoff, then restarting the job
    HELD = "held"  # a cap was reached or the cause is unknown twice: a human resumes or stops
    STOPPED = "stopped"  # the application's fault: no restart
    FINISHED = "finished"  # the job completed or was deleted: nothing left to guard


class GuardInput(BaseModel):
    job: JobRef
    policy: GuardPolicy = GuardPolicy()
    controller_task_queue: str = ""  # where node remediations run ("": the guard's own queue)
    node_task_queue: str = ""  # the blamed node's agent queue ("": remedy-node/<node>)
    ledger: JobLedger | None = None  # carried over by continue-as-new
    elastic: ElasticPolicy = ElasticPolicy()


class RestartRequest(BaseModel):
    job: JobRef
    attempt: int
    reason: str
    # Only a person may undo a stop: an automatic restart of a job remedy stopped is refused.
    resumed_by: str | None = None
    size: int | None = None  # an elastic job's new size (None: as it was)
    grow: bool = False  # the job still runs: end it (it checkpointed) and start it larger


class CheckpointRequest(BaseModel):
    """Ask a running job to checkpoint (once per ``asked_at``); answered with whether every
    pod of it acknowledged."""

    job: JobRef
    asked_at: datetime


class Checkpointed(BaseModel):
    done: bool  # every running pod of the job acknowledged the request
    detail: str = ""


class NodeBlame(BaseModel):
    """Put the node a platform failure blamed in remediation (or join its ladder)."""

    node: NodeRef
    job: str
    attribution: Attribution
    failed_at: datetime  # a ladder for the node started since (window before) owns the fault
    node_task_queue: str
    task_queue: str


class StopRequest(BaseModel):
    job: JobRef
    reason: str


class ResumeRequest(BaseModel):
    by: str
    stop: bool = False  # True: the human decides the job should not run again
    identity: str = ""  # the caller's client identity, recorded beside ``by``

    @property
    def who(self) -> str:
        return signed(self.by, self.identity)


class ResumeResult(BaseModel):
    """What a resume did: the guard's phase once it acted (restarting, stopped, watching)."""

    job: JobRef
    phase: GuardPhase
    by: str


class JobFinished(Wraps):
    """The job completed or was deleted (the job watch saw it): nothing left to guard."""

    reason: str


class JobProgress(BaseModel):
    """The fleet scan's measure of the job's goodput (each pass), and the straggler detector's
    verdict on the job's nodes (None: not judged)."""

    goodput: JobGoodput
    stragglers: StragglerReport | None = None


class GuardStatus(Wraps):
    phase: GuardPhase


class GuardResult(BaseModel):
    job: JobRef
    phase: GuardPhase
    reason: str
    ledger: JobLedger
