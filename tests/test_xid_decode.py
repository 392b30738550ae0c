"""The Xid message decoders (154, 74, 144–150, 45) over real kernel-log lines, NVIDIA's decode
sheet row by row, and arbitrary text. Every full kernel line below is copied from the source in
its comment (collected with provenance for issue 19); messages are the text after ``NN, `` with
``pid=…, name=…,`` removed, as the kernel-log parser hands them over."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from remedy.xid import load_catalog
from remedy.xid.actions import XidAction
from remedy.xid.catalog import Decoder
from remedy.xid.decode import Decoded, decode_action, decode_xid45, decode_xid154
from remedy.xid.nvlink74 import decode_nvlink74, decode_registers
from tests.xid_samples import NVLINK5_REAL, message

# -- Xid 154 -----------------------------------------------------------------------------------
XID154_REAL = [
    # eGPU investigation notes, driver 595.71.05 open, after an Xid 79 (search-index file id
    # 55079347921; repository not named)
    (
        "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
        "(Node Reboot Required)",
        XidAction.REBOOT,
    ),
    # Korean training-server notes, RTX 3090, driver 580.173.02 (search-index file id 69466299974)
    (
        "[Mon Sep 14 04:48:45 2026] NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed "
        "from 0x0 (None) to 0x2 (Node Reboot Required)",
        XidAction.REBOOT,
    ),
    # leptonai/gpud components/accelerator/nvidia/xid/kmsg_test.go@4a8de33a (lines 176, 190)
    (
        "[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 "
        "(None) to 0x4 (Drain and Reset)",
        XidAction.RESET_GPU,
    ),
    (
        "[171167.897562] NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 "
        "(Drain and Reset) to 0x1 (GPU Reset Required)",
        XidAction.RESET_GPU,
    ),
    # NVIDIA NVSentinel health-monitors/syslog-health-monitor/pkg/xid/parser/csv_test.go@0f607318
    # (line 188)
    (
        "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
        "(GPU Reset Required)",
        XidAction.RESET_GPU,
    ),
    # Newer drivers' label for 0x1: an RTX 4070 Ti's kernel log after an Xid 51, nvidia-smi -q
    # then showing "GPU Recovery Action : Reset" (search-index file id 59204176920; repository
    # not named); the same line after an Xid 62 in file id 68870947913.
    (
        "NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
        "(PF FLR)",
        XidAction.RESET_GPU,
    ),
]


@pytest.mark.parametrize(("line", "action"), XID154_REAL)
def test_xid154_real_lines_follow_the_recovery_the_driver_names(
    line: str, action: XidAction
) -> None:
    decoded = decode_xid154(message(line))
    assert decoded.action is action
    assert line.rsplit("(", 1)[1].rstrip(")") in decoded.reason  # names what the driver said


# No real line of these targets was found; each message is the driver's own format,
# "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)" (gpu.c,
# _gpuRefreshRecoveryActionInLock), with names from _gpuRecoveryActionName() of the driver tag
# that first prints them.
@pytest.mark.parametrize(
    ("target", "action"),
    [
        ("0x0 (None)", XidAction.IGNORE),  # a change back to healthy, e.g. after a reset
        ("0x3 (Drain P2P)", XidAction.CONTACT_SUPPORT),  # 565.57.01+: NVIDIA publishes no action
        ("0x5 (Recover IMEX Domain)", XidAction.CONTACT_SUPPORT),  # 595.44.02+
        ("0x6 (Unknown)", XidAction.CONTACT_SUPPORT),  # any value without a name
    ],
)
def test_xid154_targets_without_a_published_action_go_to_a_person(
    target: str, action: XidAction
) -> None:
    decoded = decode_xid154(
        f"GPU recovery action changed from 0x1 (GPU Reset Required) to {target}"
    )
    assert decoded.action is action
    assert target.split("(")[1].rstrip(")") in decoded.reason


@pytest.mark.parametrize(
    ("target", "action"),
    [
        ("0x1 (PF FLR)", XidAction.RESET_GPU),  # the value decides, whatever the label
        ("0x2 (GPU Reset Required)", XidAction.REBOOT),  # a label that disagrees loses
        ("0x9 (Node Reboot Required)", XidAction.REBOOT),  # an unknown value: the label
        ("0x9 (PF FLR)", XidAction.CONTACT_SUPPORT),  # neither known: a person
    ],
)
def test_xid154_is_decided_by_the_recovery_value_the_label_only_as_a_fallback(
    target: str, action: XidAction
) -> None:
    decoded = decode_xid154(f"GPU recovery action changed from 0x0 (None) to {target}")
    assert decoded.action is action
    assert target in decoded.reason


def test_xid154_none_means_no_recovery() -> None:
    decoded = decode_xid154(
        "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    )
    assert decoded == Decoded(XidAction.IGNORE, decoded.reason)
    assert "no recovery" in decoded.reason


@pytest.mark.parametrize(
    ("text", "action"),
    [
        # Fragments, not driver lines: a cut-off line still says which recovery by its value.
        ("GPU recovery action changed from 0x0 (None) to 0x2", XidAction.REBOOT),
        ("GPU recovery action changed from 0x0 (None) to 0x1 (", XidAction.RESET_GPU),
        ("GPU recovery action changed from 0x0 (None)", XidAction.CONTACT_SUPPORT),
        ("", XidAction.CONTACT_SUPPORT),
    ],
)
def test_xid154_tolerates_a_bare_value_and_sends_unreadable_text_to_a_person(
    text: str, action: XidAction
) -> None:
    assert decode_xid154(text).action is action


# -- Xid 74 ------------------------------------------------------------------------------------
# NVIDIA NVSentinel pkg/xid/parser/csv_test.go@0f607318 (line 88), also its
# docs/designs/024-workflow-nvlink-err.md (line 46)
XID74_REAL = (
    "NVRM: Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
    "detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
)


def test_xid74_real_line_third_register_bit_16_is_a_reset() -> None:
    decoded = decode_nvlink74(message(XID74_REAL))
    assert decoded.action is XidAction.RESET_GPU
    assert "reg 3 bit 16" in decoded.reason and "field diags" in decoded.reason


# Register payloads as NVIDIA's WORKFLOW_NVLINK_ERR text describes them (values, not lines).
@pytest.mark.parametrize(
    ("registers", "action"),
    [
        ((1, 0, 0, 0, 0, 0, 0), XidAction.IGNORE),  # reg 1 bit 0: "Can be safely ignored"
        ((1 << 23 | 1 << 30, 0, 0, 0, 0, 0, 0), XidAction.IGNORE),
        ((0, 0, 0, 0, 1 << 20 | 1 << 29, 0, 0), XidAction.IGNORE),  # reg 5: "Continue operation"
        ((1, 0, 0, 0, 1 << 26, 0, 0), XidAction.IGNORE),
        ((1 << 4, 0, 0, 0, 0, 0, 0), XidAction.RESET_GPU),  # ECC/parity
        ((1 << 21, 0, 0, 0, 0, 0, 0), XidAction.RESET_GPU),  # marginal SI
        ((1 | 1 << 8, 0, 0, 0, 0, 0, 0), XidAction.RESET_GPU),  # one real bit beats ignore bits
        ((0, 0, 0, 1 << 18, 0, 0, 0), XidAction.RESET_GPU),  # "a reset of the fabric"
        ((0, 0, 0, 0, 0, 0, 0), XidAction.RESET_GPU),  # no bit: the catalog's reset
        ((0, 0, 1 << 13, 0, 0, 0, 0), XidAction.CONTACT_SUPPORT),  # "not expected in production"
        ((1 << 2, 0, 0, 0, 0, 0, 0), XidAction.CONTACT_SUPPORT),  # undocumented bit
        ((0, 1, 0, 0, 0, 0, 0), XidAction.CONTACT_SUPPORT),  # reg 2 has no documented bits
        ((1 << 8, 0, 0, 0, 0, 0, 1 << 3), XidAction.CONTACT_SUPPORT),
        ((1 << 40, 0, 0, 0, 0, 0, 0), XidAction.CONTACT_SUPPORT),  # wider than a register
        ((1 << 8, 0, 0), XidAction.RESET_GPU),  # not seven registers: the catalog's reset
    ],
)
def test_xid74_registers_decide_ignore_reset_or_support(
    registers: tuple[int, ...], action: XidAction
) -> None:
    assert decode_registers(registers).action is action


def test_xid74_without_payload_is_the_catalogs_reset() -> None:
    # The kernel's own 74 text, kernel_nvlinkcorelibtrain.c:
    # "NVLink: failed to train link %d to remote PCI:%04x:%02x:%02x"
    decoded = decode_nvlink74("NVLink: failed to train link 3 to remote PCI:0000:07:00")
    assert decoded.action is XidAction.RESET_GPU
    assert "catalog" in decoded.reason


# -- Xid 45 ------------------------------------------------------------------------------------
XID45_REAL = [
    # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150 (driver 590.48.01)
    "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
    "previous Xid 149",
    # https://github.com/madMAx43v3r/chia-gigahorse/issues/301 (an old driver: no cause printed)
    "[14370.688139] NVRM: Xid (PCI:0000:0a:00): 45, pid='<unknown>', name=<unknown>, Ch 00000008",
]


def test_xid45_with_a_previous_xid_follows_it() -> None:
    decoded = decode_xid45(message(XID45_REAL[0]))
    assert decoded.action is XidAction.IGNORE
    assert "follows Xid 149" in decoded.reason


def test_xid45_alone_restarts_fabric_manager() -> None:
    decoded = decode_xid45(message(XID45_REAL[1]))
    assert decoded.action is XidAction.RESTART_FABRIC_MANAGER
    assert "570.123.01" in decoded.reason


# -- the dispatcher ----------------------------------------------------------------------------
CATALOG = load_catalog()


@pytest.mark.parametrize(
    ("code", "text", "action"),
    [
        (154, message(XID154_REAL[0][0]), XidAction.REBOOT),
        (154, "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", None),
        (74, message(XID74_REAL), XidAction.RESET_GPU),
        (149, message(NVLINK5_REAL[5][0]), XidAction.IGNORE),
        (145, message(NVLINK5_REAL[7][0]), XidAction.RESTART_APP),
        (45, message(XID45_REAL[0]), XidAction.IGNORE),
        (45, message(XID45_REAL[1]), XidAction.RESTART_FABRIC_MANAGER),
    ],
)
def test_catalog_entries_with_a_decoder_take_the_action_from_the_message(
    code: int, text: str, action: XidAction | None
) -> None:
    info = CATALOG.lookup(code)
    assert info.decode is not Decoder.NONE
    assert decode_action(info, text).action is (action or XidAction.IGNORE)


def test_a_known_driver_branch_reaches_the_nvlink5_decoder() -> None:
    v1_line = message(NVLINK5_REAL[8][0])  # RLW_REMAP in the V1 (<R575) layout
    info = CATALOG.lookup(145)
    assert decode_action(info, v1_line, driver_branch=570).action is XidAction.RESET_GPU
    assert decode_action(info, v1_line, driver_branch=580).action is XidAction.CONTACT_SUPPORT


def test_other_codes_take_the_catalogs_action() -> None:
    app = CATALOG.lookup(13)
    decoded = decode_action(app, "Graphics Exception: ESR 0x1")
    assert decoded == Decoded(app.action, f"catalog: {app.bucket}")
    blank = CATALOG.lookup(999).model_copy(update={"bucket": ""})
    assert decode_action(blank, "").reason == "catalog: no action published"


# -- never raises ------------------------------------------------------------------------------
BOUNDED = settings(
    max_examples=80,
    deadline=timedelta(seconds=1),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PIECES = [
    "to ",
    "0x",
    "0x0",
    "0xffffffff",
    "0x021425c6",
    "0x00000008",
    "(",
    ")",
    " (",
    ", ",
    " ",
    "None",
    "Node Reboot Required",
    "GPU Reset Required",
    "caused by previous Xid ",
    "9" * 5000,
    "f" * 300,
    "Link -1 ",
    "NETIR_LINK_EVT",
    "Fatal",
    "\x00",
    "é",
    "\n",
    "-",
]
TEXT = st.one_of(st.text(max_size=300), st.lists(st.sampled_from(PIECES), max_size=30).map("".join))


@BOUNDED
@given(text=TEXT, decoder=st.sampled_from(Decoder), code=st.integers(0, 200))
@example(text="to 0x" + "f" * 300 + " (x)", decoder=Decoder.XID154, code=154)
@example(text="caused by previous Xid " + "9" * 5000, decoder=Decoder.XID45, code=45)
@example(text="(" + ", ".join(["0x" + "f" * 16] * 7) + ")", decoder=Decoder.NVLINK74, code=74)
def test_decoders_never_raise_and_always_answer_an_action(
    text: str, decoder: Decoder, code: int
) -> None:
    info = CATALOG.lookup(code).model_copy(update={"decode": decoder})
    decoded = decode_action(info, text)
    assert isinstance(decoded.action, XidAction)
    assert decoded.reason and "\n" not in decoded.reason
