"""Kubernetes API failures as remedy errors: what to retry and what never to retry."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import urllib3
from kubernetes.client.exceptions import ApiException

from remedy.core.errors import (
    Conflict,
    NodeGone,
    PermissionDenied,
    RemedyError,
    Throttled,
    TransientError,
)

# The cause a 403 carries when a namespace being deleted refuses new content (an eviction is a
# create): not a permission remedy lacks.
NAMESPACE_TERMINATING = "NamespaceTerminating"


class NotFound(Exception):
    """A 404 on an object or a collection that is not the node (a pod deleted meanwhile, a
    CRD not installed): raised where the caller passes ``missing=NotFound``, and handled by it
    — the pod is done, the CRD is absent — never read as "the node is gone"."""


@dataclass(frozen=True)
class ApiStatus:
    """What a failed call's Status says: code, message, its causes' types, Retry-After."""

    code: int
    message: str
    causes: frozenset[str]
    retry_after: float | None


def api_status(exc: ApiException) -> ApiStatus:
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    details = body.get("details") or {}
    # A StatusCause's type is its "reason" on the wire (metav1.StatusCause's JSON name).
    causes = frozenset(str(c["reason"]) for c in details.get("causes") or [] if c.get("reason"))
    retry = (exc.headers or {}).get("Retry-After") if exc.headers else None
    try:
        retry_after = float(retry) if retry is not None else None
    except ValueError:
        retry_after = None  # an HTTP date: the retry policy's own backoff then
    return ApiStatus(
        code=int(exc.status or 0),
        message=str(body.get("message") or exc.reason),
        causes=causes,
        retry_after=retry_after,
    )


def remedy_error(
    verb: str,
    resource: str,
    status: ApiStatus,
    missing: Callable[[str], Exception] = NodeGone,
) -> Exception:
    """The one mapping from an API status to remedy's errors (see ``api_errors``)."""
    detail = f"{verb} {resource}: {status.code} {status.message}"
    error: RemedyError
    if status.code == 404:
        return missing(detail)
    if status.code == 403 and NAMESPACE_TERMINATING in status.causes:
        error = TransientError(detail)  # the namespace is going away, with what it holds
    elif status.code == 403:
        error = PermissionDenied(
            f"forbidden: remedy needs RBAC '{verb}' on {resource} ({status.message})"
        )
    elif status.code == 429:
        error = Throttled(detail, retry_after=status.retry_after)
    elif status.code == 409:
        error = Conflict(detail)
    else:
        error = TransientError(detail)
    return error


@contextmanager
def api_errors(
    verb: str, resource: str, *, missing: Callable[[str], Exception] = NodeGone
) -> Iterator[None]:
    """404 → ``missing`` (NodeGone unless the caller says what a 404 means here, e.g.
    ``NotFound`` for a pod), 403 → PermissionDenied naming the verb and resource (both
    permanent) unless the namespace is terminating; 429 → Throttled (API priority and fairness:
    retried after its Retry-After; only an eviction's 429 is a PodDisruptionBudget's no, see
    eviction.py), 409 → Conflict, 5xx and network errors → TransientError (retried)."""
    try:
        yield
    except ApiException as exc:
        raise remedy_error(verb, resource, api_status(exc), missing) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise TransientError(f"{verb} {resource}: {exc}") from exc
