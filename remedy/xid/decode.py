"""PLACEHOLDER for engineer C's message decoders (issue 19, design section C).

Only what the kernel-log parser needs to run its tests: the catalog's action, undecoded. The
integrator takes C's ``remedy/xid/decode.py`` instead of this file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from remedy.xid.actions import XidAction
from remedy.xid.catalog import XidInfo

# Until the catalog speaks XidAction (engineer A): the old FirstAction values that differ.
_OLD = {"none": XidAction.IGNORE, "inspect": XidAction.CONTACT_SUPPORT}


class Decoded(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: XidAction
    reason: str


def decode_action(info: XidInfo, message: str) -> Decoded:
    value = str(info.action.value)
    bucket = getattr(info, "bucket", "")
    return Decoded(
        action=_OLD.get(value) or XidAction(value),
        reason=f"catalog: {bucket or 'no action published'}",
    )
