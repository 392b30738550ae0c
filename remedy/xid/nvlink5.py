"""Xids 144–150 (NVLink5, Blackwell): the action NVIDIA's decode sheet gives for a payload.

A line ends in ``(<IntrInfo> <ErrorStatus> <errorDebugData>…)``, e.g.
``NETIR_LINK_EVT Fatal XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 …)``. NVIDIA's
bucket ``WORKFLOW_NVLINK5_ERR``: "<intrInfo>, <errorStatus> must be decoded and evaluated using
"XID 144-150 Decode" to derive the final resolution". That sheet is data here
(``nvlink5.tsv``, its source at its top): a row matches when IntrInfo fits the row's mask for
the driver's version — V1 before R575, V2 from R575 — and ErrorStatus is the row's value; when
the row's action-2 mask fits instead, its action 2 applies. The word ``Fatal``/``Nonfatal`` in
the line is not used: NVIDIA's severity comes from the row, and the two can disagree.

The driver's version is usually unknown where a log is read: both versions are tried and the
answer taken when one version matches, or both match with the same action (IntrInfo 0 of
Xid 150 is such a payload). Both matching with different actions, no row matching, or a
payload that cannot be read → contact_support: the sheet has no fallback and NVIDIA's NVLink
text says to report unlisted bits.

Buckets → actions: IGNORE → ignore, RESET_GPU → reset_gpu, RESTART_BM → reboot,
CONTACT_SUPPORT → contact_support, XID_154_EVAL → restart_app (NVIDIA: "If an XID 154 is seen
along with this error, take that action. If no XID 154 present, RESTART_APP" — the Xid 154
line is decoded on its own), CHECK_* / INVESTIGATE_* and anything else → contact_support.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from remedy.xid.actions import XidAction
from remedy.xid.decoded import Decoded, first_line

SHEET_FILE = Path(__file__).with_name("nvlink5.tsv")
FIRST_V2_BRANCH = 575  # "V1(<R575)", "V2(>=R575)"
_PAYLOAD = re.compile(
    r"\(\s*(0x[0-9a-fA-F]{1,8})\s+(0x[0-9a-fA-F]{1,8})(?:\s+0x[0-9a-fA-F]+)*\s*\)"
)
_BUCKETS = {
    "IGNORE": XidAction.IGNORE,
    "RESET_GPU": XidAction.RESET_GPU,
    "RESTART_BM": XidAction.REBOOT,
    "CONTACT_SUPPORT": XidAction.CONTACT_SUPPORT,
    "XID_154_EVAL": XidAction.RESTART_APP,
}


class Version(StrEnum):
    V1 = "V1 (<R575)"
    V2 = "V2 (>=R575)"


@dataclass(frozen=True, slots=True)
class Mask:
    """A 32-character sheet mask, bit 31 first: which bits are compared, and to what."""

    care: int
    value: int

    @classmethod
    def parse(cls, text: str) -> Mask | None:
        if text == "-":
            return None
        if len(text) != 32 or set(text) - set("01-"):
            raise ValueError(f"not a 32-bit mask: {text!r}")
        care = int("".join("0" if c == "-" else "1" for c in text), 2)
        return cls(care, int(text.replace("-", "0"), 2))

    def fits(self, word: int) -> bool:
        return word & self.care == self.value

    def overlaps(self, other: Mask) -> bool:
        """Whether some word fits both masks."""
        return (self.value ^ other.value) & self.care & other.care == 0


@dataclass(frozen=True, slots=True)
class SheetRow:
    xid: int
    subcode: str  # "V1 name/V2 name" where they differ
    masks: dict[Version, Mask]
    action2_masks: dict[Version, Mask]
    error_status: frozenset[int] | None  # None: any
    immediate: str
    action2: str
    investigatory: str
    severity: str

    def bucket(self, version: Version, intr_info: int, error_status: int) -> str | None:
        """The row's bucket for this payload under ``version``, or None when it does not match."""
        if self.error_status is not None and error_status not in self.error_status:
            return None
        if self.masks[version].fits(intr_info):
            return self.immediate
        action2 = self.action2_masks.get(version)
        return self.action2 if action2 is not None and action2.fits(intr_info) else None

    def name(self, version: Version) -> str:
        names = self.subcode.split("/")
        return names[0] if version is Version.V1 else names[-1]


Sheet = Mapping[int, list[SheetRow]]


def load_sheet(path: Path = SHEET_FILE) -> Sheet:
    """The sheet's rows by Xid; a malformed row is an error naming its line."""
    rows: dict[int, list[SheetRow]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    for number, fields in enumerate(csv.DictReader(lines, delimiter="\t"), start=1):
        try:
            row = _row(fields)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path.name}: data row {number}: {exc}") from None
        rows.setdefault(row.xid, []).append(row)
    return rows


def _row(fields: dict[str, str]) -> SheetRow:
    masks = {v: Mask.parse(fields[f"{v.name.lower()}_mask"]) for v in Version}
    action2 = {v: Mask.parse(fields[f"{v.name.lower()}_action2_mask"]) for v in Version}
    status = fields["error_status"]
    return SheetRow(
        xid=int(fields["xid"]),
        subcode=fields["subcode"],
        masks={v: m for v, m in masks.items() if m is not None},
        action2_masks={v: m for v, m in action2.items() if m is not None},
        error_status=None if status == "*" else frozenset(int(s, 16) for s in status.split("/")),
        immediate=fields["immediate"],
        action2=fields["action2"],
        investigatory=fields["investigatory"],
        severity=fields["severity"],
    )


def bucket_action(bucket: str) -> XidAction:
    """The action for one of the sheet's buckets; CHECK_*, INVESTIGATE_* or any other:
    contact_support."""
    return _BUCKETS.get(bucket, XidAction.CONTACT_SUPPORT)


# Read once at import: decoding a line does no I/O.
SHEET = load_sheet()


def payload_of(message: str) -> tuple[int, int] | None:
    """IntrInfo and ErrorStatus: the first two hex words of the last payload in parentheses."""
    found = _PAYLOAD.findall(message)
    return (int(found[-1][0], 16), int(found[-1][1], 16)) if found else None


def decode_nvlink5(
    code: int, message: str, driver_branch: int | None = None, sheet: Sheet = SHEET
) -> Decoded:
    """The action for an Xid 144–150 line (rules in the module docstring). ``driver_branch``
    (570, 575, …) picks the sheet's version when known."""
    payload = payload_of(message)
    if payload is None:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"Xid {code}: no IntrInfo/ErrorStatus payload in {first_line(message, 60)!r}; "
            "NVIDIA's decode sheet cannot be applied",
        )
    intr_info, error_status = payload
    said = f"Xid {code} IntrInfo {intr_info:#010x} ErrorStatus {error_status:#010x}"
    if driver_branch is None:
        versions = list(Version)
    else:
        versions = [Version.V1 if driver_branch < FIRST_V2_BRANCH else Version.V2]
    matches = {
        version: found
        for version in versions
        if (found := _matches(sheet.get(code, []), version, intr_info, error_status))
    }
    actions = {bucket_action(bucket) for found in matches.values() for _, bucket in found}
    if not matches:
        tried = " or ".join(versions)
        return Decoded(
            XidAction.CONTACT_SUPPORT, f"{said}: no row of NVIDIA's decode sheet matches ({tried})"
        )
    if len(actions) > 1:
        return Decoded(
            XidAction.CONTACT_SUPPORT,
            f"{said}: ambiguous, the decode sheet's rows disagree ({_describe(matches)})",
        )
    return Decoded(actions.pop(), f"{said}: {_describe(matches)}")


def _matches(
    rows: list[SheetRow], version: Version, intr_info: int, error_status: int
) -> list[tuple[SheetRow, str]]:
    found = []
    for row in rows:
        bucket = row.bucket(version, intr_info, error_status)
        if bucket is not None:
            found.append((row, bucket))
    return found


def _describe(matches: dict[Version, list[tuple[SheetRow, str]]]) -> str:
    parts = []
    for version, found in matches.items():
        for row, bucket in found:
            parts.append(_describe_row(version, row, bucket))
    return "; ".join(dict.fromkeys(parts))


def _describe_row(version: Version, row: SheetRow, bucket: str) -> str:
    text = f"{row.name(version)} {version}: {bucket}"
    if bucket == "XID_154_EVAL":
        text += " (NVIDIA: if no Xid 154 follows, RESTART_APP)"
    return f"{text}, investigatory {row.investigatory}, severity {row.severity}"
