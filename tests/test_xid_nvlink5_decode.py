"""The NVLink5 decoder (Xids 144–150) over real kernel-log lines and NVIDIA's decode sheet row by
row: IntrInfo and ErrorStatus against the sheet, V1 (<R575) and V2 (>=R575). Every full kernel
line below is copied from the source in its comment."""

from __future__ import annotations

from pathlib import Path

import pytest

from remedy.xid.actions import XidAction
from remedy.xid.nvlink5 import SHEET, SHEET_FILE, Version, bucket_action, decode_nvlink5, load_sheet
from tests.xid_samples import NVLINK5_REAL, XID_LINE, message


@pytest.mark.parametrize(("line", "action", "said"), NVLINK5_REAL)
def test_nvlink5_real_lines_decode_as_nvidias_sheet_says(
    line: str, action: XidAction, said: str
) -> None:
    match = XID_LINE.search(line)
    assert match
    decoded = decode_nvlink5(int(match["code"]), match["msg"])
    assert decoded.action is action
    assert said in decoded.reason


def test_nvlink5_known_driver_branch_picks_the_version() -> None:
    line = NVLINK5_REAL[8][0]  # V1-shaped RLW_REMAP
    assert decode_nvlink5(145, message(line), driver_branch=570).action is XidAction.RESET_GPU
    on_v2 = decode_nvlink5(145, message(line), driver_branch=575)
    assert on_v2.action is XidAction.CONTACT_SUPPORT
    assert "no row" in on_v2.reason


def test_nvlink5_unreadable_payload_goes_to_a_person() -> None:
    # https://github.com/NVIDIA/nccl/issues/2241 (B200; the reporter redacted '(...)')
    decoded = decode_nvlink5(145, "RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)")
    assert decoded.action is XidAction.CONTACT_SUPPORT


def row_payloads() -> list[tuple[int, int, int, int, XidAction]]:
    """For every sheet row and version: an IntrInfo built from its mask ("-" bits 0), its
    ErrorStatus, and the action its bucket means; the same for its action-2 mask."""
    cases = []
    for code, rows in SHEET.items():
        for row in rows:
            status = min(row.error_status) if row.error_status else 0x12345678
            for version in Version:
                branch = 570 if version is Version.V1 else 580
                cases.append(
                    (code, row.masks[version].value, status, branch, bucket_action(row.immediate))
                )
                if version in row.action2_masks:
                    action2 = bucket_action(row.action2)
                    cases.append((code, row.action2_masks[version].value, status, branch, action2))
    return cases


@pytest.mark.parametrize(("code", "intr_info", "status", "branch", "action"), row_payloads())
def test_every_sheet_row_decodes_to_its_bucket(
    code: int, intr_info: int, status: int, branch: int, action: XidAction
) -> None:
    payload = f"Link 01 ({intr_info:#010x} {status:#010x} 0x00000000 0x00000000)"
    assert decode_nvlink5(code, payload, driver_branch=branch).action is action


def test_the_sheet_never_gives_one_payload_two_actions() -> None:
    """Why decoding without the driver's version is sound: no IntrInfo/ErrorStatus fits two
    rows (of either version) whose actions differ, so "try both" can never pick wrongly."""
    assert sum(len(rows) for rows in SHEET.values()) == 95
    for rows in SHEET.values():
        entries = [
            (mask, row.error_status, bucket_action(bucket))
            for row in rows
            for version in Version
            for mask, bucket in [(row.masks[version], row.immediate)]
            + ([(row.action2_masks[version], row.action2)] if version in row.action2_masks else [])
        ]
        for mask, status, action in entries:
            for other, other_status, other_action in entries:
                statuses_meet = (
                    status is None or other_status is None or bool(status & other_status)
                )
                if statuses_meet and mask.overlaps(other):
                    assert action is other_action


def test_sheet_buckets_map_to_actions() -> None:
    assert bucket_action("RESTART_BM") is XidAction.REBOOT
    assert bucket_action("XID_154_EVAL") is XidAction.RESTART_APP
    assert bucket_action("CHECK_NVLINK_FAILURE_FLOW") is XidAction.CONTACT_SUPPORT
    assert bucket_action("INVESTIGATE_HOST") is XidAction.CONTACT_SUPPORT


def test_versions_that_disagree_are_ambiguous(tmp_path: Path) -> None:
    # A sheet of two invented rows whose V1 and V2 masks both fit IntrInfo 0x1.
    header = next(line for line in SHEET_FILE.read_text().splitlines() if line.startswith("xid\t"))
    ones = "-" * 31 + "1"
    path = tmp_path / "sheet.tsv"
    path.write_text(
        f"# test\n{header}\n"
        f"144\tA\t{ones}\t{'0' * 32}\t-\t-\t*\tIGNORE\t-\tIGNORE\tNon-fatal\n"
        f"144\tB\t{'0' * 32}\t{ones}\t-\t-\t*\tRESET_GPU\t-\tCONTACT_SUPPORT\tFatal\n"
    )
    sheet = load_sheet(path)
    payload = "(0x00000001 0x00000000)"
    decoded = decode_nvlink5(144, payload, sheet=sheet)
    assert decoded.action is XidAction.CONTACT_SUPPORT and "ambiguous" in decoded.reason
    assert decode_nvlink5(144, payload, driver_branch=560, sheet=sheet).action is XidAction.IGNORE


def test_a_malformed_sheet_row_is_an_error_naming_it(tmp_path: Path) -> None:
    header = next(line for line in SHEET_FILE.read_text().splitlines() if line.startswith("xid\t"))
    path = tmp_path / "sheet.tsv"
    path.write_text(f"{header}\n144\tA\t0101\t-\t-\t-\t*\tIGNORE\t-\tIGNORE\tNon-fatal\n")
    with pytest.raises(ValueError, match="data row 1: not a 32-bit mask"):
        load_sheet(path)
