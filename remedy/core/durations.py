"""Human durations for runbooks: ``90s``, ``10m``, ``1h30m``, ``2d`` or a number of seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|d|h|m|s)")


def parse_duration(value: Any) -> timedelta:
    """Parse a runbook duration; raise ValueError with a message an author can act on."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 10m or 1h, not a boolean")
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        negative = text.startswith("-")
        body = text.lstrip("-")
        parts = _PART.findall(body)
        if not body or "".join(n + u for n, u in parts) != body:
            raise ValueError(f"{value!r} is not a duration: use forms like 30s, 10m, 1h30m or 2d")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts) * (-1 if negative else 1)
    else:
        raise ValueError(f"expected a duration such as 30s, 10m or 1h, got {type(value).__name__}")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    if math.isnan(seconds):
        raise ValueError(f"{value!r} is not a duration: use forms like 30s, 10m, 1h30m or 2d")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:  # .inf, 1e20: pydantic reports only ValueError as a field's error
        raise ValueError(f"{value!r} is too long for a duration") from None


def format_duration(delta: timedelta) -> str:
    """The inverse of parse_duration for whole seconds: 5400 s → ``1h30m``."""
    total = int(delta.total_seconds())
    if total == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda d: d.total_seconds(), return_type=float, when_used="json"),
    # What an author writes, for editors that complete and check runbooks from the schema.
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^\s*((\d+(\.\d+)?)(ms|d|h|m|s)\s*)+$"},
                {"type": "number", "minimum": 0},
            ],
            "description": "A duration: 90s, 10m, 1h30m, 2d, 500ms, or a number of seconds.",
        },
        mode="validation",
    ),
]
