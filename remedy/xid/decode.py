"""PLACEHOLDER for engineer C's message decoders (issue 19, design section C).

Only what the kernel-log parser needs to run its tests: the catalog's action, undecoded. The
integrator takes C's ``remedy/xid/decode.py`` instead of this file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from remedy.xid.actions import XidAction
from remedy.xid.catalog import XidInfo


class Decoded(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: XidAction
    reason: str


def decode_action(info: XidInfo, message: str) -> Decoded:
    return Decoded(action=info.action, reason=f"catalog: {info.bucket or 'no action published'}")
