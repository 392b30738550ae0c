"""Xid 74 (NVLink error, A100 and H100): the action its seven-register payload calls for.

The message ends in seven registers, e.g.
``NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)``.
NVIDIA's catalog (bucket ``WORKFLOW_NVLINK_ERR``) says what each documented bit means; the
text is advice, not an action table, so remedy derives an action from it:

- **ignore** when every set bit is one NVIDIA says to ignore or continue on: register 1 bits
  0, 23, 30 ("Can be safely ignored"), register 5 bits 20, 23, 26, 29 ("a threshold of ECC
  errors being exceeded. There was no uncorrectable error at this time. Continue operation").
- **contact_support** when any set bit is not documented — registers 2, 6 and 7 have no
  documented bits ("If bits other than those specifically outlined below are seen, please
  report a bug") — or register 3 bit 13 is set ("Not expected to be seen in production. If
  seen, please report a bug").
- **reset_gpu** for every other documented bit, and when no bit is set at all, because the
  catalog's text for 74 is "A GPU reset or node reboot is needed to clear this error". That
  covers the ECC/parity bits, the mechanical and signal-integrity bits, the sympathetic bits
  (register 1 bits 1, 20; register 4 bits 16, 17) and register 4 bit 18 ("a reset of the fabric
  is required"). NVIDIA's escalations that need history ("If seen more than 2 times on the same
  link, report a bug", "If seen solo", "If seen repeatedly") are the ladder's: one line cannot
  tell, so the reason quotes them.
- **reset_gpu** for a 74 line without a register payload (link training failures, which the
  kernel prints itself) and for a payload that is not seven hex words: the catalog's text again.

NVIDIA documents no R575 difference for Xid 74 (the V1/V2 split is for Xids 144–150 only).
"""

from __future__ import annotations

import re

from remedy.xid.actions import XidAction
from remedy.xid.decoded import Decoded, first_line

REGISTERS = 7
_HEX_WORD = r"0x[0-9a-fA-F]{1,16}"
_PAYLOAD = re.compile(rf"\(\s*({_HEX_WORD}(?:\s*,\s*{_HEX_WORD})*)\s*\)")
_CATALOG = "catalog: a GPU reset or node reboot is needed to clear this error"

_IGNORE, _RESET, _BUG = "ignore", "reset", "bug"

# (register 1-based, bits) → what NVIDIA's WORKFLOW_NVLINK_ERR text says, in short.
_DOCUMENTED: list[tuple[int, tuple[int, ...], str, str]] = [
    (1, (0, 23, 30), _IGNORE, "can be safely ignored"),
    (1, (1, 20), _RESET, "sympathetic; if seen solo, report a bug"),
    (1, (4, 5), _RESET, "ECC/parity; more than 2 times on the link: report a bug"),
    (1, (8, 9, 12, 16, 17, 24, 28), _RESET, "possible hardware: check link mechanicals, diags"),
    (1, (21, 22), _RESET, "marginal channel SI: check link mechanicals, field diags"),
    (1, (27, 29), _RESET, "if seen repeatedly, report a bug"),
    (3, (0, 1, 2, 6), _RESET, "ECC/parity; more than 2 times on the link: report a bug"),
    (3, (13,), _BUG, "not expected in production: report a bug"),
    (3, (16, 19), _RESET, "if seen repeatedly, run field diags and report a bug"),
    (3, (17, 18), _RESET, "if seen repeatedly, report a bug"),
    (4, (16, 17), _RESET, "sympathetic; if seen solo, report a bug"),
    (4, (18,), _RESET, "sympathetic; a reset of the fabric is required"),
    (5, (18, 19, 21, 22, 24, 25, 27, 28), _RESET, "ECC/parity; more than 2 times: report a bug"),
    (5, (20, 23, 26, 29), _IGNORE, "ECC threshold exceeded, no uncorrectable error: continue"),
]
_BIT_RULES: dict[tuple[int, int], tuple[str, str]] = {
    (register, bit): (verdict, note)
    for register, bits, verdict, note in _DOCUMENTED
    for bit in bits
}


def registers_of(message: str) -> tuple[int, ...] | None:
    """The register payload — the last parenthesised list of hex words — or None."""
    found = _PAYLOAD.findall(message)
    if not found:
        return None
    return tuple(int(word, 16) for word in re.split(r"\s*,\s*", found[-1].strip()))


def decode_registers(registers: tuple[int, ...]) -> Decoded:
    """The action for a seven-register payload (rules in the module docstring)."""
    shown = "(" + ", ".join(hex(value) for value in registers) + ")"
    if len(registers) != REGISTERS:
        return Decoded(
            XidAction.RESET_GPU,
            f"Xid 74 payload {first_line(shown)} has {len(registers)} registers, NVIDIA "
            f"documents {REGISTERS}; {_CATALOG}",
        )
    set_bits = [
        (number, bit)
        for number, value in enumerate(registers, start=1)
        for bit in range(value.bit_length())
        if value >> bit & 1
    ]
    if not set_bits:
        return Decoded(XidAction.RESET_GPU, f"Xid 74 {shown}: no error bit set; {_CATALOG}")
    undocumented = [f"reg {n} bit {b}" for n, b in set_bits if (n, b) not in _BIT_RULES]
    if undocumented:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid 74 {shown}: {', '.join(undocumented[:4])} not documented by NVIDIA "
            "(WORKFLOW_NVLINK_ERR: other bits, report a bug)",
        )
    verdicts = {_BIT_RULES[bit][0] for bit in set_bits}
    # The strongest verdict decides; the reason quotes NVIDIA on the bits that decided it.
    verdict = next(v for v in (_BUG, _RESET, _IGNORE) if v in verdicts)
    notes = "; ".join(
        f"reg {n} bit {b}: {_BIT_RULES[(n, b)][1]}"
        for n, b in set_bits
        if _BIT_RULES[(n, b)][0] == verdict
    )
    said = f"Xid 74 {shown}: {first_line(notes, 160)} (NVIDIA)"
    if verdict == _BUG:
        return Decoded(XidAction.CONTACT_SUPPORT, said)
    if verdict == _IGNORE:
        return Decoded(XidAction.IGNORE, said)
    return Decoded(XidAction.RESET_GPU, f"{said}; {_CATALOG}")


def decode_nvlink74(message: str) -> Decoded:
    registers = registers_of(message)
    if registers is None:
        return Decoded(
            XidAction.RESET_GPU,
            f"Xid 74 without a register payload ({first_line(message, 60) or 'no text'}); "
            f"{_CATALOG}",
        )
    return decode_registers(registers)
