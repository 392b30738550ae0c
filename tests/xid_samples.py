"""Real Xid kernel-log lines shared by the decoder tests, each with the source it was copied
from, and the message the kernel-log parser hands to a decoder."""

from __future__ import annotations

import re

from remedy.xid.actions import XidAction

XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:[^)]*\): (?P<code>\d+), (?:pid=[^,]*, name=[^,]*, )?(?P<msg>.*)$"
)


def message(line: str) -> str:
    """The message of a real kernel line, as the parser hands it to the decoders."""
    match = XID_LINE.search(line)
    assert match, line
    return match["msg"]


# -- Xids 144–150 ------------------------------------------------------------------------------
# decoding.md "Worked decodes of real lines": each expected action from that table.
NVLINK5_REAL = [
    # leptonai/gpud components/accelerator/nvidia/xid/kmsg_test.go@4a8de33a (line 169)
    (
        "[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 "
        "(0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "INVESTIGATE_PEER_DEVICE",
    ),
    # leptonai/gpud components/accelerator/nvidia/xid/kmsg_extended_test.go@4a8de33a (Log12)
    (
        "NVRM: Xid (PCI:0008:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "INVESTIGATE_LINK_SI",
    ),
    # https://github.com/leptonai/gpud/pull/1160 and /pull/1174 (descriptions)
    (
        "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.IGNORE,
        "INVESTIGATE_SW/USER",
    ),
    # NVIDIA NVSentinel pkg/xid/parser/csv_test.go@0f607318 (line 56)
    (
        "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 09 (0x025525c6 "
        "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "INVESTIGATE_PEER_DEVICE",
    ),
    # leptonai/gpud kmsg_extended_test.go@4a8de33a (Log6)
    (
        "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 "
        "0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "SYMPATHETIC_REPORT_SOLO",
    ),
    # leptonai/gpud kmsg_extended_test.go@4a8de33a (Log4)
    (
        "NVRM: Xid (PCI:0008:01:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 01 (0x00082226 "
        "0x00000001 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.IGNORE,
        "INVESTIGATE_LINK_SI_AND_CABLES",
    ),
    # leptonai/gpud kmsg_extended_test.go@4a8de33a (Log2): pid/name before the subcode
    (
        "NVRM: Xid (PCI:0018:01:00): 145, pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal "
        "XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
        XidAction.IGNORE,
        "CONTACT_SUPPORT",
    ),
    # leptonai/gpud kmsg_extended_test.go@4a8de33a (Log10): XID_154_EVAL, no 154 yet
    (
        "NVRM: Xid (PCI:0008:01:00): 145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 16 (0x040a08e2 "
        "0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESTART_APP,
        "XID_154_EVAL",
    ),
    # NVIDIA NVSentinel tests/syslog_health_monitor_test.go@0f607318 (line 216): V1-shaped
    (
        "kernel: [16450076.435584] NVRM: Xid (PCI:0001:00:00): 145, RLW_REMAP Fatal XC1 i0 Link 10 "
        "(0x00000082 0x00000040 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "V1",
    ),
    # NVIDIA NVSentinel tests/syslog_health_monitor_test.go@0f607318 (line 219): V2-shaped,
    # "Nonfatal" in the text although the sheet's row is Fatal
    (
        "kernel: [16450076.435584] NVRM: Xid (PCI:0002:00:00): 145, RLW_REMAP Nonfatal XC1 i0 "
        "Link 10 (0x00000004 0x00000040 0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.RESET_GPU,
        "V2",
    ),
    # https://github.com/leptonai/gpud/pull/1160 (description): V2-shaped 144
    (
        "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 "
        "0x00000000 0x00000000 0x00000000 0x00000000)",
        XidAction.IGNORE,
        "SAW_MVB V2",
    ),
]
