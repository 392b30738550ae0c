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

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar, get_type_hints

from temporalio import activity, workflow
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.workflow import UpdateMethodMultiParam

A = TypeVar("A")
R = TypeVar("R")
P = TypeVar("P")
F = TypeVar("F", bound=Callable[..., Any])


class Queue(StrEnum):
    """Which worker serves an activity."""

    CONTROLLER = "controller"  # the controller's task queue
    NODE = "node"  # the node's own agent, on the node's queue: a dead node never picks it up


class ContractError(TypeError):
    """An implementation does not match its declaration."""


REJECTED = "Rejected"  # the failure type of a validator's refusal


class UpdateRejected(Exception):
    """The workflow's validator refused the update; the message says why (nothing changed)."""


class UpdateUnknown(Exception):
    """The workflow has no handler for the update: it runs code from before the update existed
    (the caller may fall back to the signal)."""


@dataclass(frozen=True)
class ActivityDef(Generic[A, R]):
    name: str
    arg: type[A] | None  # None: the activity takes no argument
    result: type[R] | None  # None: it returns nothing
    queue: Queue

    def defn(self, fn: F) -> F:
        """Register ``fn`` (a function or method) as this activity, after checking its types."""
        _check_signature(self, fn)
        return activity.defn(name=self.name)(fn)

    async def execute(self, arg: A, *, task_queue: str | None = None, **options: Any) -> R:
        """Call it from a workflow; ``options`` are ``workflow.execute_activity``'s (timeouts,
        retry policy, summary). A node activity needs the node's task queue."""
        if self.queue is Queue.NODE and task_queue is None:
            raise ContractError(f"{self.name} runs on the node: pass the node's task queue")
        result: R = await workflow.execute_activity(
            self.name,
            args=[] if self.arg is None else [arg],
            task_queue=task_queue,
            result_type=self.result,
            **options,
        )
        return result


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

    async def send(self, handle: WorkflowHandle[Any, Any], payload: P) -> None:
        """From a client (an activity, the CLI, a reporter)."""
        await handle.signal(self.name, payload)

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
                    raise ApplicationError(reason, type=REJECTED, non_retryable=True)

            handler.validator(validate)
            return why_not

        return declare

    async def execute(self, handle: WorkflowHandle[Any, Any], payload: P) -> R:
        """From a client: what the workflow did, or ``UpdateRejected`` with its reason, or
        ``UpdateUnknown`` when the workflow predates the update."""
        try:
            result: R = await handle.execute_update(self.name, payload, result_type=self.result)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
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
