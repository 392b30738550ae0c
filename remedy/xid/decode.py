"""The action an Xid's message calls for, where NVIDIA says the message decides.

Most Xids have one immediate action in NVIDIA's catalog. For five the answer is in the line:

- **154** names the recovery the driver needs: ``GPU recovery action changed from 0x0 (None)
  to 0x2 (Node Reboot Required)``. The target's value decides (newer drivers print other
  labels for the same values: 0x1 is "PF FLR" from driver 610 on): 0x0 None → ignore (the
  driver needs no recovery; any other Xid keeps its own action), 0x1 GPU Reset Required and
  0x4 Drain and Reset → reset_gpu (remedy drains before a reset anyway), 0x2 Node Reboot
  Required → reboot; 0x3 Drain P2P, 0x5 Recover IMEX Domain → contact_support: NVIDIA
  publishes no action for them. A value remedy does not know is decided by its label when
  that is one of these names, else (and anything unreadable) → contact_support.
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

# NV2080_CTRL_GPU_RECOVERY_ACTION_* → the name older drivers print, remedy's action and the
# reason. The value decides: newer drivers print other names for the same values (driver 610:
# 0x1 is "PF FLR", a function-level reset of the GPU, which nvidia-smi shows as "Reset").
_BY_VALUE: dict[int, tuple[str, XidAction, str]] = {
    0: ("None", XidAction.IGNORE, "no recovery needed"),
    1: ("GPU Reset Required", XidAction.RESET_GPU, "the GPU needs a reset"),
    2: ("Node Reboot Required", XidAction.REBOOT, "the node needs a reboot"),
    3: ("Drain P2P", XidAction.CONTACT_SUPPORT, "NVIDIA publishes no action for it"),
    4: ("Drain and Reset", XidAction.RESET_GPU, "remedy drains before a reset anyway"),
    5: ("Recover IMEX Domain", XidAction.CONTACT_SUPPORT, "NVIDIA publishes no action for it"),
}
# A value this table does not know (a newer driver's): the printed name, if it is one of these.
_BY_NAME = {name.lower(): value for value, (name, _, _) in _BY_VALUE.items()}


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
    """The recovery the driver needs, by the target's numeric value (``to 0x1 (PF FLR)``); the
    printed name decides only for a value remedy does not know."""
    target = _XID154_TARGET.findall(message)
    if not target:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid 154: no recovery action readable in {first_line(message, 60)!r}",
        )
    value, said = int(target[-1][0], 16), first_line(target[-1][1].strip(), 40)
    known = _BY_VALUE.get(value) or _BY_VALUE.get(_BY_NAME.get(said.lower(), -1))
    printed = f"{value:#x}" + (f" ({said})" if said else "")
    if known is None:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid 154: driver asks for recovery {printed}: NVIDIA publishes no action for it",
        )
    name, action, why = known
    also = "" if said.lower() == name.lower() else f", {name}"
    return Decoded(action, f"Xid 154: recovery action changed to {printed}{also}: {why}")


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
