"""The Xid catalog and the kernel-log parser, over real line formats and broken ones."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pynvml
import pytest

from remedy.core.models import Severity
from remedy.xid import load_catalog, parse_kernel_log
from remedy.xid.catalog import UNKNOWN_CLASS
from remedy.xid.kernel_log import normalize_pci
from tests.processes import Children

REAL_LINES = (Path(__file__).parent / "data" / "kernel.log").read_text()
MALFORMED = """\
NVRM: Xid (PCI:0000:5a:00): banana
NVRM: Xid (PCI:zz): 79, bad address
NVRM: Xid PCI:0000:5a:00 79 no parentheses
\x00\x01\x02 binary junk NVRM: Xid (
NVRM: GPU at PCI:not-an-address: GPU-xyz
just a kernel line about usb
"""


def test_real_line_formats() -> None:
    events = parse_kernel_log(REAL_LINES.splitlines())
    got = [(e.code, e.pci_bus_id, e.pid, e.process, e.line) for e in events]
    assert got == [
        (79, "0000:5a:00", None, None, 2),
        (46, "0000:03:00", None, None, 3),
        (13, "0002:00:00", 2519562, "python3", 4),
        (63, "0000:10:1c", 1896, None, 5),
        (31, "0000:10:1c", None, None, 6),
        (48, "0000:5a:00", 77, "train.py", 7),
        (64, "0000:5a:00", None, None, 8),
        (999, "0000:9b:00", None, None, 9),
    ]


def test_gpu_uuid_comes_from_the_gpu_at_pci_line() -> None:
    events = parse_kernel_log(REAL_LINES.splitlines())
    uuids = {e.code: e.gpu_uuid for e in events}
    assert uuids[79] == uuids[48] == "GPU-2b8b6c2e-0000-4c1a-9a7e-1234567890ab"
    assert uuids[13] is None


def test_messages_timestamps_and_classes() -> None:
    by_code = {e.code: e for e in parse_kernel_log(REAL_LINES.splitlines())}
    assert by_code[13].message == "Graphics Exception: ESR 0x1"
    assert by_code[31].message == "Ch 00000008, intr 10000000"
    assert by_code[48].timestamp == datetime(2026, 11, 29, 7, 37, 9, tzinfo=UTC)
    assert by_code[13].uptime_s == pytest.approx(103859.498995)
    assert by_code[64].uptime_s == pytest.approx(103859.498995)  # kmsg microseconds
    assert (by_code[79].fault_class, by_code[79].recommended_action) == ("bus", "reboot")
    assert (by_code[13].fault_class, by_code[13].severity) == ("application", Severity.WARNING)
    assert by_code[63].severity is Severity.INFO


def test_unknown_xid_is_an_unknown_hardware_fault_never_healthy() -> None:
    [event] = [e for e in parse_kernel_log(REAL_LINES.splitlines()) if e.code == 999]
    assert event.fault_class == UNKNOWN_CLASS
    assert event.severity is Severity.CRITICAL


def test_malformed_lines_are_skipped_without_crashing() -> None:
    assert parse_kernel_log(MALFORMED.splitlines()) == []


def test_catalog_differs_per_generation() -> None:
    catalog = load_catalog()
    ampere, volta = pynvml.NVML_DEVICE_ARCH_AMPERE, pynvml.NVML_DEVICE_ARCH_VOLTA
    assert "remapping" in catalog.lookup(63, ampere).description  # NVIDIA's words since Ampere
    assert "page retirement" in catalog.lookup(63, volta).description
    assert catalog.lookup(79, volta) == catalog.lookup(79, pynvml.NVML_DEVICE_ARCH_HOPPER)
    assert catalog.lookup(48, None).action.value == "reset_gpu"


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("00000000:5A:00.0", "0000:5a:00"),
        ("PCI:0000:5a:00", "0000:5a:00"),
        ("0002:00:00", "0002:00:00"),
    ],
)
def test_pci_addresses_normalise(raw: str, normal: str) -> None:
    assert normalize_pci(raw) == normal


def test_remedy_xid_parse_prints_one_json_object_per_event(
    tmp_path: Path, processes: Children
) -> None:
    log = tmp_path / "dmesg.txt"
    log.write_text(REAL_LINES + MALFORMED)
    remedy = str(Path(sys.executable).parent / "remedy")
    from_file = processes.run([remedy, "xid", "parse", str(log), "--json"], timeout=60)
    from_stdin = processes.run(
        [remedy, "xid", "parse", "-", "--json"], input=log.read_text(), timeout=60
    )
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == from_stdin.stdout
    objects = [json.loads(line) for line in from_file.stdout.splitlines()]
    assert [o["code"] for o in objects] == [79, 46, 13, 63, 31, 48, 64, 999]
    first = objects[0]
    assert first["gpu_uuid"] == "GPU-2b8b6c2e-0000-4c1a-9a7e-1234567890ab"
    assert (first["fault_class"], first["recommended_action"]) == ("bus", "reboot")
