"""Typed names: each activity, signal and query is declared once with its payload types, and
workflows, activities, workers and the CLI all go through the declaration — none spells a name.

An ``ActivityDef`` checks, when an implementation is registered with ``defn``, that the
function takes and returns the declared types; ``execute`` is how a workflow calls it. A
``SignalDef`` or ``QueryDef`` names the workflow type that handles it, so a test can check that
every one sent has a handler (tests/test_contract.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar, get_type_hints

from temporalio import activity, workflow
from temporalio.client import WorkflowHandle

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
        raise ContractError(f"signal {name}: {fn.__qualname__} takes {took}, not {payload}")
