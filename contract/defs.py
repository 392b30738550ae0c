"""Typed names: each activity, signal, query and update is declared once with its payload
types, and workflows, activities, workers and the CLI all go through the declaration — none
spells a name.

An ``ActivityDef`` checks, when an implementation is registered with ``defn``, that the
function takes and returns the declared types; ``execute`` is how a workflow calls it. A
``SignalDef``, ``QueryDef`` or ``UpdateDef`` names the workflow type that handles it, so a test
can check that every one sent has a handler (tests/test_contract.py). An update answers: its
validator refuses, at the caller and with nothing written to the history, what there is nothing
to do for (``UpdateRejected`` on the client); its handler returns what it changed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar, get_type_hints

from temporalio import activity, workflow
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import Priority, RawValue
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.workflow import UpdateMethodMultiParam

from contract.stopping import FinishedAfterStop, may_start
from contract.unreadable import Unreadable, read

A = TypeVar("A")
R = TypeVar("R")
P = TypeVar("P")
F = TypeVar("F", bound=Callable[..., Any])


class Queue(StrEnum):
    """Which worker serves an activity."""

    CONTROLLER = "controller"  # the controller's task queue
    NODE = "node"  # the node's own agent, on the node's queue: a dead node never picks it up


# What a pool's leases wait on — the budget's workflow tasks and its activities, a ladder's
# request and its leave to cordon — goes ahead of the ladders' own backlog on the same task
# queue (the server's task queue priority: 1 goes first, unset is 3). A burst of 1,000 ladders
# otherwise queues each hop of a lease behind every ladder's tasks.
URGENT = Priority(priority_key=1)


# A local activity's retry with a backoff longer than this waits on a timer of the server, not
# in the worker: in the history, the workflow task closed meanwhile, and a test's time-skipping
# clock moves it (the SDK's default, a minute, would retry a failing call in the worker, in
# wall time, for every backoff of remedy's retry policies).
LOCAL_RETRY_BY_TIMER = timedelta(seconds=1)


class ContractError(TypeError):
    """An implementation does not match its declaration."""


REJECTED = "Rejected"  # the failure type of a validator's refusal
RETRY = "RetryLater"  # one that asks the caller to send it again: the workflow is not ready
READY_WITHIN_S = 30.0  # how long a caller keeps sending an update the workflow asks again for
READY_RETRY_S, READY_RETRY_MAX_S = 0.05, 1.0


class Retry(str):
    """A validator's reason to send the update again a little later (the workflow is not ready
    to judge it: a ladder reading its operator keyring). Nothing reaches the history."""

    __slots__ = ()


class UpdateRejected(Exception):
    """The workflow's validator refused the update; the message says why (nothing changed)."""


class UpdateRetry(UpdateRejected):
    """The workflow asks for the update again a little later; the message says why."""


class UpdateUnknown(Exception):
    """The workflow has no handler for the update: it runs code from before the update existed
    (the caller may fall back to the signal)."""


@dataclass(frozen=True)
class ActivityDef(Generic[A, R]):
    name: str
    arg: type[A] | None  # None: the activity takes no argument
    result: type[R] | None  # None: it returns nothing
    queue: Queue
    urgent: bool = False  # dispatched ahead of the task queue's backlog (``URGENT``)

    def defn(self, fn: F) -> F:
        """Register ``fn`` (a function or method) as this activity, after checking its types."""
        _check_signature(self, fn)
        return activity.defn(name=self.name)(fn)

    async def execute(
        self,
        arg: A,
        *,
        task_queue: str | None = None,
        gives_back: bool = False,
        local: bool = False,
        **options: Any,
    ) -> R:
        """Call it from a workflow; ``options`` are ``workflow.execute_activity``'s (timeouts,
        retry policy, summary). A node activity needs the node's task queue.

        A cancellation is never a failure: when the calling task is cancelled (an abort), the
        SDK ends the activity with an ``ActivityError`` whose cause is a ``CancelledError``;
        it is raised as ``asyncio.CancelledError``, so no ``except ActivityError`` reads it as
        a failed step or a failed probe. ``gives_back``: a step that undoes what remedy took
        (the GPUs back after a reset) still runs once the task was told to stop. ``local``:
        a controller activity run by this worker inside the workflow task (a local activity):
        no task of its own on the server, its answer a marker in the history."""
        if self.queue is Queue.NODE and (task_queue is None or local):
            why = "cannot run in the controller" if local else "pass the node's task queue"
            raise ContractError(f"{self.name} runs on the node: {why}")
        stopped = await may_start(self.name, gives_back)
        if self.urgent and not local:  # a local one runs at once, in this worker
            options.setdefault("priority", URGENT)
        if local:  # its retries wait on the server's timers, as a regular one's do
            options.setdefault("local_retry_threshold", LOCAL_RETRY_BY_TIMER)
            _deadline_in_attempts(options)
        else:
            options["task_queue"] = task_queue
        run = workflow.execute_local_activity if local else workflow.execute_activity
        try:
            try:
                result: R = await run(
                    self.name,
                    args=[] if self.arg is None else [arg],
                    result_type=self.result,
                    **options,
                )
            except FailureError as err:
                if not local or isinstance(err, ActivityError):
                    raise
                raise _failed_locally(self.name, err) from err
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):  # cancelled, not failed
                raise asyncio.CancelledError(f"{self.name} cancelled") from err
            raise
        if stopped():  # it finished as the stop came in: its answer must not drive a next step
            raise FinishedAfterStop(self.name, result)
        return result


def _deadline_in_attempts(options: dict[str, Any]) -> None:
    """A local activity's schedule-to-close deadline is kept by the worker's clock, which a
    test's time-skipping server does not move (nor a replay): it is also spelt as the number
    of attempts whose backoffs fit in it, so that it ends on workflow time too, after the same
    retries as a regular activity's."""
    deadline, policy = options.get("schedule_to_close_timeout"), options.get("retry_policy")
    if deadline is None or policy is None or policy.maximum_attempts:
        return
    cap = policy.maximum_interval or policy.initial_interval * 100  # the SDK's default cap
    waited, interval, attempts = timedelta(0), policy.initial_interval, 1
    while waited + interval <= deadline:
        waited += interval
        attempts += 1
        interval = min(interval * policy.backoff_coefficient, cap)
    options["retry_policy"] = dataclasses.replace(policy, maximum_attempts=attempts)


def _failed_locally(name: str, err: FailureError) -> ActivityError:
    """A local activity's failure comes unwrapped (its ApplicationError, timeout or
    cancellation): wrapped as a regular one's, so every ``except ActivityError`` and
    ``err.cause`` reads both alike."""
    return ActivityError(
        f"local activity {name} failed",
        scheduled_event_id=0,
        started_event_id=0,
        identity="",
        activity_type=name,
        activity_id="",
        retry_state=None,
    )


@dataclass(frozen=True)
class SignalDef(Generic[P]):
    name: str
    payload: type[P]
    workflow: str  # the workflow type that handles it

    def handler(self, fn: F) -> F:
        """Declare a workflow method as this signal's handler."""
        _check_payload(self.name, self.payload, fn)
        handled: F = workflow.signal(name=self.name)(fn)
        return handled

    def guarded(self, max_bytes: int) -> Callable[[F], F]:
        """Declare a workflow method as this signal's handler, given ``Unreadable`` instead of
        the payload when it is over ``max_bytes`` (not read at all) or does not read as the
        payload's type: a signal cannot be refused before it reaches the history, but it can be
        refused with a reason the handler records and counts, instead of a decoding traceback
        in the worker's log for anyone to send."""

        def declare(fn: F) -> F:
            _check_payload(self.name, self.payload | Unreadable, fn)  # type: ignore[arg-type]
            payload = self.payload

            # "self" unannotated: the SDK reads only such a first parameter as the workflow's.
            async def handle(self, raw: RawValue) -> None:  # type: ignore[no-untyped-def]
                result = fn(self, read(raw, payload, max_bytes))
                if inspect.isawaitable(result):
                    await result

            handle.__name__, handle.__qualname__ = fn.__name__, fn.__qualname__
            handled: F = workflow.signal(name=self.name)(handle)  # type: ignore[assignment]
            return handled

        return declare

    async def send(self, handle: WorkflowHandle[Any, Any], payload: P) -> None:
        """From a client (an activity, the CLI, a reporter)."""
        await handle.signal(self.name, payload)

    async def send_if_running(self, handle: WorkflowHandle[Any, Any], payload: P) -> bool:
        """From a client, to a workflow that may be gone: False when it is not running (closed,
        or never was); any other refusal is raised."""
        try:
            await self.send(handle, payload)
        except RPCError as err:
            if err.status is not RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True

    async def send_to(self, workflow_id: str, payload: P) -> None:
        """From inside a workflow, to another one."""
        await workflow.get_external_workflow_handle(workflow_id).signal(self.name, payload)

    def start_with(self, payload: P) -> dict[str, Any]:
        """``start_workflow`` options for signal-with-start."""
        return {"start_signal": self.name, "start_signal_args": [payload]}


@dataclass(frozen=True)
class QueryDef(Generic[R]):
    name: str
    result: type[R]
    workflow: str

    def handler(self, fn: F) -> F:
        handled: F = workflow.query(name=self.name)(fn)
        return handled

    async def ask(self, handle: WorkflowHandle[Any, Any], **options: Any) -> R:
        answer: R = await handle.query(self.name, result_type=self.result, **options)
        return answer


@dataclass(frozen=True)
class UpdateDef(Generic[P, R]):
    name: str
    payload: type[P]
    result: type[R]
    workflow: str
    # What the caller signals when the workflow asks for the update again (``Retry``): the
    # signal that makes it ready (a ladder reads its operator keyring), sent before each try.
    ready: SignalDef[Any] | None = None

    def handler(
        self, fn: Callable[[Any, P], Awaitable[R]]
    ) -> UpdateMethodMultiParam[[Any, P], Awaitable[R]]:
        """Declare a workflow method as this update's handler."""
        _check_payload(self.name, self.payload, fn)
        returns = get_type_hints(fn).get("return")
        if returns is not self.result:
            raise ContractError(f"update {self.name}: {fn.__qualname__} returns {returns}")
        return workflow.update(name=self.name)(fn)

    def validator(
        self, handler: UpdateMethodMultiParam[[Any, P], Awaitable[R]]
    ) -> Callable[[Callable[[Any, P], str]], Callable[[Any, P], str]]:
        """Declare the method that says why not (an empty string: go ahead). A reason rejects
        the update at the caller; nothing reaches the workflow's history."""

        def declare(why_not: Callable[[Any, P], str]) -> Callable[[Any, P], str]:
            _check_payload(self.name, self.payload, why_not)

            @functools.wraps(why_not)  # the SDK compares the validator's parameters
            def validate(wf: Any, payload: P) -> None:
                reason = why_not(wf, payload)
                if reason:
                    kind = RETRY if isinstance(reason, Retry) else REJECTED
                    raise ApplicationError(str(reason), type=kind, non_retryable=True)

            handler.validator(validate)
            return why_not

        return declare

    async def execute(self, handle: WorkflowHandle[Any, Any], payload: P) -> R:
        """From a client: what the workflow did, or ``UpdateRejected`` with its reason, or
        ``UpdateUnknown`` when the workflow predates the update. One the workflow asks for
        again (``UpdateRetry``: nothing reached its history) goes again, after the ``ready``
        signal, for up to ``READY_WITHIN_S``."""
        loop = asyncio.get_running_loop()
        deadline, pause = loop.time() + READY_WITHIN_S, READY_RETRY_S
        while True:
            try:
                return await self._execute_once(handle, payload)
            except UpdateRetry:
                if self.ready is None or loop.time() > deadline:
                    raise
                await self.ready.send(handle, self.ready.payload())
                await asyncio.sleep(pause)  # a keyring read is a workflow task and an activity
                pause = min(pause * 2, READY_RETRY_MAX_S)

    async def _execute_once(self, handle: WorkflowHandle[Any, Any], payload: P) -> R:
        try:
            result: R = await handle.execute_update(self.name, payload, result_type=self.result)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == RETRY:
                raise UpdateRetry(cause.message) from None
            if isinstance(cause, ApplicationError) and cause.type == REJECTED:
                raise UpdateRejected(cause.message) from None
            if isinstance(cause, ApplicationError) and "expected but not found" in cause.message:
                raise UpdateUnknown(cause.message) from None
            raise
        return result


def _check_signature(spec: ActivityDef[Any, Any], fn: Callable[..., Any]) -> None:
    hints = get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    wanted = [] if spec.arg is None else [spec.arg]
    took = [hints.get(p) for p in params]
    returns = hints.get("return", type(None))
    if took != wanted or returns is not (spec.result or type(None)):
        raise ContractError(
            f"activity {spec.name}: {fn.__qualname__} takes {took} and returns {returns}; "
            f"the contract says it takes {wanted} and returns {spec.result}"
        )


def _check_payload(name: str, payload: type[Any], fn: Callable[..., Any]) -> None:
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    took = [get_type_hints(fn).get(p) for p in params]
    if took != [payload]:
        raise ContractError(f"message {name}: {fn.__qualname__} takes {took}, not {payload}")
