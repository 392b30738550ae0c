"""The kernel log is read on every probe, beside NVML's Xid events: from /dev/kmsg, the journal
or a file, each line once (a cursor), nothing from before this boot, and the same Xid seen by
NVML and in the log counted once. Real line formats (tests/data/kmsg.txt, journal-k.txt), a
fake journalctl on PATH, the real probe over the simulated NVML."""

from __future__ import annotations

import doctest
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.host.kernel_log import KernelLogTail
from adapters.host.kernel_sources import (
    AutoSource,
    JournalSource,
    KmsgSource,
    kernel_log_source,
)
from adapters.sim import SimFleet
from remedy.core.models import ProbeReport
from remedy.detection.probe import probe_node
from remedy.detection.probe.xid_dedup import XidDedup
from remedy.detection.probe.xid_events import XidWatcher
from remedy.xid.kernel_log import KernelLogSource
from tests.conftest import ROOT

NODE = "gpu-node-000"
DATA = ROOT / "tests" / "data"
BOOT = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


@pytest.fixture
def fleet() -> SimFleet:
    return SimFleet(nodes=1, gpus_per_node=8, check_timeout_s=2.0)


def probe(fleet: SimFleet, source: KernelLogSource, **config: object) -> ProbeReport:
    host = fleet.host(NODE)
    return probe_node(NODE, host.nvml(), replace(host.probe_config, kernel_log=source, **config))


def xids(report: ProbeReport) -> list[tuple[str, int | None]]:
    return [(f.reason, f.component.index) for f in report.findings if f.check == "xid"]


def kmsg(tmp_path: Path, boot: str = "boot-a") -> KmsgSource:
    (tmp_path / "boot_id").write_text(boot + "\n")
    return KmsgSource(DATA / "kmsg.txt", tmp_path / "cursor.json", tmp_path / "boot_id")


def fake_journalctl(tmp_path: Path, body: str) -> str:
    """A journalctl on PATH that logs its arguments and runs ``body``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "journalctl"
    script.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n{body}\n')
    script.chmod(0o755)
    return str(script)


JOURNAL = f"""case "$*" in
  *--after-cursor=*) echo "-- cursor: s=next;i=1a2b4" ;;
  *) cat {DATA / "journal-k.txt"} ;;
esac"""


# -- the regression: NVML is fine and silent, the log has the Xid ---------------------------
def test_an_xid_in_the_log_is_seen_while_nvml_works_and_delivers_nothing(
    fleet: SimFleet, tmp_path: Path
) -> None:
    report = probe(fleet, kmsg(tmp_path))
    assert not report.healthy
    assert report.checks_run[0] == "inventory" and report.checks_run[-3:] == [
        "kernel_log",
        "nic",
        "nic_link",
    ]
    assert ("Xid79", 2) in xids(report)  # GPU 2 by its PCI id, with its serial from NVML
    [xid79] = [f for f in report.findings if f.reason == "Xid79"]
    assert xid79.component.serial == fleet.node(NODE).gpus[2].serial
    assert xid79.evidence.startswith("bus: GPU has fallen off the bus.")


def test_every_xid_of_the_kmsg_records_is_read_once(fleet: SimFleet, tmp_path: Path) -> None:
    first = probe(fleet, kmsg(tmp_path))
    assert xids(first) == [
        ("Xid79", 2),
        ("Xid48", 5),
        ("Xid63", None),
        ("Xid94", None),
        ("Xid119", None),
    ]
    assert xids(probe(fleet, kmsg(tmp_path))) == []  # a new reader takes the cursor up
    assert xids(probe(fleet, kmsg(tmp_path, boot="boot-b"))) != []  # a new boot numbers anew


def test_new_kmsg_records_after_the_cursor_are_read(tmp_path: Path) -> None:
    log = tmp_path / "kmsg"
    shutil.copy(DATA / "kmsg.txt", log)
    (tmp_path / "boot_id").write_text("boot-a\n")
    source = KmsgSource(log, tmp_path / "cursor.json", tmp_path / "boot_id")
    assert len(source.read_new()) == 8  # records only: no continuation, no comment
    with log.open("a") as f:
        f.write("3,1029,6781760000000,-;NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off\n")
    assert source.read_new() == [
        "3,1029,6781760000000,-;NVRM: Xid (PCI:0000:38:00): 79, GPU has fallen off"
    ]


# -- the journal, through a journalctl on PATH ----------------------------------------------
@pytest.mark.server  # a fake journalctl runs as a process
def test_the_journal_is_read_after_its_cursor(fleet: SimFleet, tmp_path: Path) -> None:
    command = fake_journalctl(tmp_path, JOURNAL)
    source = JournalSource(tmp_path / "cursor.json", journalctl=command)
    report = probe(fleet, source, not_before=BOOT)
    assert xids(report) == [("Xid62", 2), ("Xid154", 2)]
    [xid62] = [f for f in report.findings if f.reason == "Xid62"]
    assert xid62.observed_at == datetime(2026, 11, 30, 6, 14, 7, tzinfo=UTC)
    again = JournalSource(tmp_path / "cursor.json", journalctl=command)  # after a restart
    assert xids(probe(fleet, again, not_before=BOOT)) == []
    first, second = (tmp_path / "calls").read_text().splitlines()
    assert first == "-k -b -o short-iso --no-pager -q --show-cursor"
    assert second.endswith(
        "--after-cursor=s=0c3f5e1a9e7b4c0f8a1d2e3f4a5b6c7d;i=1a2b3;"
        "b=7d4c9e2f0a1b4c3d8e7f6a5b4c3d2e1f;m=35b2c1d;t=62e3f1a2b3c4d;"
        "x=9f8e7d6c5b4a3f2e"
    )


def test_xids_logged_before_this_boot_do_not_count(fleet: SimFleet, tmp_path: Path) -> None:
    log = tmp_path / "kern.log"  # rsyslog's RFC 3339 timestamps (Ubuntu 24.04)
    log.write_text(
        "2026-11-30T05:58:41.118203+00:00 gpu-node-000 kernel: NVRM: Xid (PCI:0000:38:00): 79, "
        "pid=1173, GPU has fallen off the bus.\n"
        "2026-11-30T06:20:11.004711+00:00 gpu-node-000 kernel: NVRM: Xid (PCI:0000:68:00): 48, "
        "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been "
        "detected on GPU in the framebuffer at physAddr 0x7fdf0de80 partition 5, subpartition 1\n"
    )
    assert xids(probe(fleet, KernelLogTail(log), not_before=BOOT)) == [("Xid48", 5)]


# -- a source that cannot be read is a finding, never silence -------------------------------
@pytest.mark.parametrize(
    ("source", "says"),
    [
        (lambda tmp: KmsgSource(tmp / "no-kmsg"), "No such file or directory"),
        (lambda tmp: KernelLogTail(tmp / "kern.log"), "kern.log"),
        (
            lambda tmp: JournalSource(
                journalctl=fake_journalctl(
                    tmp,
                    "echo 'No journal files were opened due to insufficient permissions.' >&2"
                    "\nexit 1",
                )
            ),
            "exited 1: No journal files were opened due to insufficient permissions.",
        ),
        (lambda tmp: JournalSource(journalctl=str(tmp / "none")), "none is not installed"),
    ],
)
@pytest.mark.server  # a fake journalctl runs as a process
def test_a_log_that_cannot_be_read_makes_the_probe_unhealthy(
    fleet: SimFleet, tmp_path: Path, source: object, says: str
) -> None:
    report = probe(fleet, source(tmp_path))  # type: ignore[operator]
    assert not report.healthy
    assert "kernel_log" not in report.checks_run
    [unreadable] = [f for f in report.findings if f.check == "kernel_log"]
    assert unreadable.reason == "KernelLogUnreadable" and says in unreadable.evidence


@pytest.mark.server  # a fake journalctl runs as a process
def test_auto_takes_kmsg_then_the_journal_then_a_file(tmp_path: Path) -> None:
    log = tmp_path / "messages"
    log.write_text("Nov 30 06:14:07 gpu-node-000 kernel: NVRM: Xid (PCI:0000:38:00): 79, x\n")
    journal = fake_journalctl(tmp_path, JOURNAL)

    def auto(kmsg: Path, journalctl: str) -> AutoSource:
        return AutoSource(None, kmsg, journalctl, (tmp_path / "kern.log", log))

    on_kmsg = auto(DATA / "kmsg.txt", journal)
    assert len(on_kmsg.read_new()) == 8 and str(on_kmsg) == f"auto: kmsg {DATA / 'kmsg.txt'}"
    on_journal = auto(tmp_path / "no-kmsg", journal)
    assert len(on_journal.read_new()) == 5 and str(on_journal) == "auto: journal"
    on_file = auto(tmp_path / "no-kmsg", "no-journalctl")
    assert len(on_file.read_new()) == 1 and str(on_file) == f"auto: file {log}"
    log.unlink()
    with pytest.raises(OSError, match="no kernel log source can be read") as nothing:
        auto(tmp_path / "no-kmsg", "no-journalctl").read_new()
    assert "journal: no-journalctl is not installed" in str(nothing.value)


def test_the_kernel_log_option() -> None:
    assert isinstance(kernel_log_source("auto"), AutoSource)
    assert isinstance(kernel_log_source("journal:/host/var/log/journal"), JournalSource)
    assert str(kernel_log_source("file:/host/var/log/kern.log")) == "file /host/var/log/kern.log"
    assert str(kernel_log_source("/var/log/messages")) == "file /var/log/messages"
    assert str(kernel_log_source("kmsg")) == "kmsg /dev/kmsg"
    assert kernel_log_source("none") is None
    with pytest.raises(ValueError, match="use auto, kmsg"):
        kernel_log_source("dmesg")


# -- one Xid, two witnesses ------------------------------------------------------------------
def test_an_xid_seen_by_nvml_and_in_the_log_counts_once(fleet: SimFleet, tmp_path: Path) -> None:
    seen = XidDedup()
    watcher = XidWatcher(NODE, fleet.host(NODE).nvml(), lambda: BOOT)
    assert watcher.start()
    fleet.inject(NODE, "mcu_halt", gpu=2)  # NVML raises Xid 62 on GPU 2; the probe sees no more
    [event] = seen.admit(watcher.wait(1.0), "nvml", datetime.now(UTC))  # the probe's clock
    assert (event.reason, event.component.index) == ("Xid62", 2)
    watcher.stop()

    log = tmp_path / "kern.log"
    line = (
        "Nov 30 06:14:07 gpu-node-000 kernel: NVRM: Xid (PCI:0000:38:00): 62, 323f0f30 0000c3d8 "
        "00000000 206dae68 206da022 206da190 206d85f6 206d8d86\n"
    )
    log.write_text(line)
    tail = KernelLogTail(log)
    first = probe(fleet, tail, xids_seen=seen)
    assert xids(first) == [] and first.healthy  # the log's line is the Xid NVML reported
    with log.open("a") as f:
        f.write(line)  # it happened again: NVML has not seen this one
    assert xids(probe(fleet, tail, xids_seen=seen)) == [("Xid62", 2)]


def test_sightings_further_apart_than_the_window_are_two_xids() -> None:
    from datetime import timedelta

    from remedy.core.models import Component, ComponentKind, Finding, Severity
    from remedy.detection.probe import xid_dedup

    assert doctest.testmod(xid_dedup).failed == 0  # the worked example in the docstring
    gpu = Component(kind=ComponentKind.GPU, index=2, pci_bus_id="00000000:38:00.0")
    xid = Finding(
        node=NODE,
        check="xid",
        reason="Xid62",
        severity=Severity.CRITICAL,
        component=gpu,
        xid=62,
        observed_at=BOOT,
    )
    seen = XidDedup(window=timedelta(minutes=5))
    assert seen.admit([xid], "nvml", BOOT) == [xid]
    assert seen.admit([xid], "kernel_log", BOOT + timedelta(minutes=6)) == [xid]
    assert seen.admit([xid], "nvml", BOOT + timedelta(minutes=7)) == []  # pairs with the line
