"""The action an Xid's message calls for, where NVIDIA says the message decides.

Most Xids have one immediate action in NVIDIA's catalog. For five the answer is in the line:

- **154** names the recovery the driver needs: ``GPU recovery action changed from 0x0 (None)
  to 0x2 (Node Reboot Required)``. The target decides: None → ignore (the driver needs no
  recovery; any other Xid keeps its own action), GPU Reset Required and Drain and Reset →
  reset_gpu (remedy drains before a reset anyway), Node Reboot Required → reboot. Drain P2P,
  Recover IMEX Domain, Unknown and anything unreadable → contact_support: NVIDIA publishes no
  action for them.
- **74** (A100/H100 NVLink) carries seven registers: ``remedy/xid/nvlink74.py``.
- **144–150** (NVLink5) carry IntrInfo and ErrorStatus for NVIDIA's decode sheet:
  ``remedy/xid/nvlink5.py``.
- **45** names its cause from driver 570.123.01 on (`` caused by previous Xid 149``): then it
  is not solo and follows that Xid → ignore. Without it NVIDIA's ``WORKFLOW_XID_45`` "Solo:
  RESTART_FM" applies → restart_fabric_manager (older drivers never name the cause, so there a
  45 may not really be solo).

Pure functions of the message: no I/O, and no input makes them raise.
"""

from __future__ import annotations

import re

from remedy.xid.actions import XidAction
from remedy.xid.catalog import Decoder, XidInfo
from remedy.xid.decoded import Decoded, first_line
from remedy.xid.nvlink5 import decode_nvlink5
from remedy.xid.nvlink74 import decode_nvlink74

__all__ = [
    "Decoded",
    "decode_action",
    "decode_nvlink5",
    "decode_nvlink74",
    "decode_xid45",
    "decode_xid154",
]

# `to 0x%x (%s)`: the new action's value and, in the last parentheses, its name.
_XID154_TARGET = re.compile(
    r"\bto\s+0x(?P<value>[0-9a-fA-F]{1,8})(?![0-9a-fA-F])(?:\s*\((?P<name>[^()]*)\))?"
)
_XID45_CAUSE = re.compile(r"caused by previous Xid (?P<code>\d{1,6})(?!\d)")

# _gpuRecoveryActionName() in the driver (gpu.c); values from NV2080_CTRL_GPU_RECOVERY_ACTION_*.
_RECOVERY_NAMES = {
    0: "None",
    1: "GPU Reset Required",
    2: "Node Reboot Required",
    3: "Drain P2P",
    4: "Drain and Reset",
    5: "Recover IMEX Domain",
}
# The name the driver printed → remedy's action, and the reason ({v}: the value printed).
_RECOVERY_ACTIONS = {
    "none": (XidAction.IGNORE, "recovery action changed to None ({v}): no recovery needed"),
    "gpu reset required": (XidAction.RESET_GPU, "driver asks for GPU Reset Required ({v})"),
    "node reboot required": (XidAction.REBOOT, "driver asks for Node Reboot Required ({v})"),
    "drain and reset": (XidAction.RESET_GPU, "driver asks for Drain and Reset ({v})"),
}


def decode_action(info: XidInfo, message: str, driver_branch: int | None = None) -> Decoded:
    """The final action for an Xid with catalog entry ``info`` and message text ``message``
    (the line after ``NN,``; the whole line works too). ``driver_branch`` (570, 575, …) when
    known picks the NVLink5 sheet's version."""
    match info.decode:
        case Decoder.XID154:
            return decode_xid154(message)
        case Decoder.NVLINK74:
            return decode_nvlink74(message)
        case Decoder.NVLINK5:
            return decode_nvlink5(info.code, message, driver_branch)
        case Decoder.XID45:
            return decode_xid45(message)
    return Decoded(info.action, f"catalog: {info.bucket or 'no action published'}")


def decode_xid154(message: str) -> Decoded:
    target = _XID154_TARGET.findall(message)
    if not target:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid 154: no recovery action readable in {first_line(message, 60)!r}",
        )
    value, name = int(target[-1][0], 16), target[-1][1].strip()
    said = name or _RECOVERY_NAMES.get(value, "")
    known = _RECOVERY_ACTIONS.get(said.lower())
    if known is None:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid 154: driver asks for {first_line(said, 40) or 'an unnamed recovery action'} "
            f"({value:#x}): NVIDIA publishes no action for it",
        )
    action, reason = known
    return Decoded(action, "Xid 154: " + reason.format(v=hex(value)))


def decode_xid45(message: str) -> Decoded:
    cause = _XID45_CAUSE.search(message)
    if cause is not None:
        return Decoded(
            XidAction.IGNORE,
            f"Xid 45 follows Xid {int(cause['code'])}: that Xid's action applies "
            "(NVIDIA WORKFLOW_XID_45: not solo, IGNORE)",
        )
    return Decoded(
        XidAction.RESTART_FABRIC_MANAGER,
        "Xid 45 names no previous Xid: solo per NVIDIA WORKFLOW_XID_45 (RESTART_FM); drivers "
        "before 570.123.01 never name one, so there it may not be solo",
    )
