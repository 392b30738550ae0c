"""Kubernetes API failures as remedy errors: what to retry and what never to retry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException

from remedy.errors import (
    Conflict,
    DrainBlocked,
    NodeGone,
    PermissionDenied,
    RemedyError,
    TransientError,
)


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)


@contextmanager
def api_errors(verb: str, resource: str) -> Iterator[None]:
    """404 → NodeGone, 403 → PermissionDenied naming the verb and resource (both permanent);
    429 → DrainBlocked, 409 → Conflict, 5xx and network errors → TransientError (retried)."""
    try:
        yield
    except ApiException as exc:
        detail = f"{verb} {resource}: {exc.status} {_message(exc)}"
        error: RemedyError
        if exc.status == 404:
            error = NodeGone(detail)
        elif exc.status == 403:
            error = PermissionDenied(
                f"forbidden: remedy needs RBAC '{verb}' on {resource} ({_message(exc)})"
            )
        elif exc.status == 429:
            error = DrainBlocked(detail)
        elif exc.status == 409:
            error = Conflict(detail)
        else:
            error = TransientError(detail)
        raise error from exc
    except urllib3.exceptions.HTTPError as exc:
        raise TransientError(f"{verb} {resource}: {exc}") from exc
