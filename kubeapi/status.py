"""API errors as kube-apiserver sends them: a ``Status`` object with the HTTP code, the reason
clients switch on, and causes."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        causes: list[dict[str, str]] | None = None,
        retry_after_s: int | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        """``metadata``: the Status's list metadata (a 410's continue token for the rest)."""
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.causes = causes or []
        self.retry_after_s = retry_after_s
        self.metadata = metadata or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.causes:
            body["details"] = {"causes": self.causes}
        return body


def not_found(plural: str, name: str) -> ApiError:
    return ApiError(404, f'{plural} "{name}" not found')


def conflict(plural: str, name: str, why: str) -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {plural} "{name}": {why}')


def invalid(kind: str, name: str, errors: list[tuple[str, str]]) -> ApiError:
    """422 naming each field, like the API server's field errors."""
    listed = ", ".join(f"{field}: {what}" for field, what in errors)
    return ApiError(
        422,
        f'{kind} "{name}" is invalid: {listed}',
        causes=[{"reason": "FieldValueInvalid", "message": w, "field": f} for f, w in errors],
    )
