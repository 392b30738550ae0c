"""One exception hierarchy for everything an action can hit.

``permanent`` decides retries: the activity layer turns a permanent error into a non-retryable
Temporal failure (its type is the class name), so a retry policy never loops on it.
"""

from __future__ import annotations


class RemedyError(Exception):
    permanent = False


class NodeGone(RemedyError):
    """The node no longer exists (404): nothing to retry."""

    permanent = True


class PermissionDenied(RemedyError):
    """remedy lacks a permission (403); the message names it."""

    permanent = True


class ActionRefused(RemedyError):
    """The action must not run here (opt-out label, unknown provider, unsafe state)."""

    permanent = True


class OtherRepairer(ActionRefused):
    """Another repairer (Karpenter's node repair or disruption, EKS node auto repair) is at work
    on the node: remedy does not act there (adapters/kubernetes/repairers.py); the message says
    who and what."""

    @staticmethod
    def said(node: str, who: str) -> str:
        """What the refusal, and a ladder that steps back, say."""
        return f"another repairer is at work on node {node}: {who}"


class ActionFailed(RemedyError):
    """The action ran and did not work (a reset on a lost GPU): escalate, do not retry."""

    permanent = True


class TransientError(RemedyError):
    """A conflict, a timeout or a 5xx: try again."""


class Throttled(TransientError):
    """The API server asked to slow down (429 on a call that is not an eviction): retried,
    after ``retry_after`` seconds when it said how long."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Conflict(TransientError):
    """The object changed since it was read (409): read it again and retry."""


class DrainBlocked(TransientError):
    """A PodDisruptionBudget forbids an eviction now (429)."""


def permanent_error_types() -> list[str]:
    """The names Temporal's retry policies must not retry (an activity raises them as the
    failure's type): every permanent error of the hierarchy."""
    found, todo = [], list(RemedyError.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo.extend(cls.__subclasses__())
        if cls.permanent:
            found.append(cls.__name__)
    return found
