"""What a workflow makes of a message before it reads it: over a size bound it is not read at
all, and one that does not read as its type is ``Unreadable`` — said by name, never quoted —
instead of the decoding traceback the SDK would log for anyone who can send a signal."""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue


class Unreadable(NamedTuple):
    """A message a guarded handler could not read: why, never what it said."""

    why: str


def read(raw: RawValue, payload: type[Any], max_bytes: int) -> Any:
    """``raw`` as ``payload`` (from inside a workflow), or ``Unreadable`` saying why not."""
    size = len(raw.payload.data)
    if size > max_bytes:
        return Unreadable(f"{size:,} bytes, over the limit of {max_bytes:,}: not read")
    try:
        return workflow.payload_converter().from_payload(raw.payload, payload)
    except ValidationError as exc:
        fields = sorted(
            {".".join(str(p) for p in e["loc"]) or "(the message)" for e in exc.errors()}
        )
        return Unreadable(f"not a {payload.__name__}: {', '.join(fields[:5])} invalid")
    except Exception as exc:  # noqa: BLE001 - any other payload (not JSON, another encoding)
        return Unreadable(f"not a {payload.__name__} ({type(exc).__name__})")
