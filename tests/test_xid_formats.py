"""The kernel-log parser over real driver lines, one test per format and code family.

Every line under tests/data/xid/ is copied verbatim from a real log, NVIDIA's documentation or a
peer project's captured test data, with its `# source:` comment beside it. Where no capture
exists (a `GPU-CI` tag, a process name with a space) the line is rendered here from the driver's
own printf format string, and the test says so.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from remedy.core.models import Severity
from remedy.xid import XidCatalog, XidInfo, load_catalog
from remedy.xid.actions import XidAction
from remedy.xid.decode import decode_action
from remedy.xid.kernel_log import XidEvent, parse_kernel_log, scan_kernel_log
from remedy.xid.lines import gpu_at
from remedy.xid.nvswitch import Fatality, SXidEvent, parse_sxids
from workers.cli import app

DATA = Path(__file__).parent / "data" / "xid"
FILES = sorted(DATA.glob("*.log"))
# krcReportXid_IMPL (open-gpu-kernel-modules kernel_rc.c, R515–R565 / 570.86.15+), %02u → %02d.
MIG_CI_FORMAT = "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02d GPU-CI:%02d): %d, pid=%s, name=%s, %s"
PLAIN_FORMAT = "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s%s"


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def xids(name: str) -> list[XidEvent]:
    return parse_kernel_log(lines(name))


def on(name: str, needle: str) -> XidEvent:
    """The one Xid event parsed from the line of ``name`` that contains ``needle``."""
    text = lines(name)
    [event] = [e for e in xids(name) if needle in text[e.line - 1]]
    return event


def test_mig_gpu_instance_is_read_as_decimal_from_nvidias_example() -> None:
    tagged = on("mig.log", "GPU-I:05")
    assert (tagged.code, tagged.pci_bus_id) == (94, "0000:01:00")
    assert (tagged.gpu_instance, tagged.compute_instance) == (5, None)
    assert (tagged.pid, tagged.process) == (7194, None)
    assert tagged.message == "Contained: CE User Channel (0x9). RST: No, D-RST: No"
    untagged = [e for e in xids("mig.log") if e is not tagged and e.gpu_instance is None]
    assert [(e.code, e.pid) for e in untagged] == [(94, 7062), (95, 7062)]


def test_mig_compute_instance_rendered_from_the_driver_format() -> None:
    # No capture of a GPU-CI line exists; this is the driver's printf with decimal ids >= 10,
    # which a hex reading would get wrong.
    line = MIG_CI_FORMAT % (0, 0x3B, 0, 12, 10, 13, "2519562", "python3", "Graphics Exception")
    [event] = parse_kernel_log([line])
    assert (event.pci_bus_id, event.gpu_instance, event.compute_instance) == ("0000:3b:00", 12, 10)
    assert (event.code, event.pid, event.process, event.message) == (
        13,
        2519562,
        "python3",
        "Graphics Exception",
    )


def test_old_style_address_without_pci_prefix() -> None:
    events = xids("old_style.log")
    assert [(e.code, e.pci_bus_id, e.pid, e.process) for e in events] == [
        (14, "0000:03:00", None, None),
        (13, "0000:03:00", None, None),
        (8, "0000:01:00", None, None),
        (16, "0000:01:00", None, None),
        (32, "0000:01:00", None, None),
        (31, "0000:01:00", None, None),
    ]
    assert on("old_style.log", "): 16, ").message == ""  # the data went on the next line
    assert on("old_style.log", "): 14, ").message == "Channel 00000001"


def test_pid_and_name_in_every_driver_era() -> None:
    cases = {
        # R515–R565: both, or both unknown
        "pid=1045242": (43, 1045242, "pt_main_thread", "Ch 00000008"),
        "Contained: SM (0x1)": (94, None, None, "Contained: SM (0x1). RST: No, D-RST: No"),
        "name=train.3": (32, 2280636, "train.3", "Channel ID 0000000d intr0 00040000"),
        "python3.10": (31, 2512125, "python3.10", None),
        # names with colons and brackets
        "name=nvc:[driver]": (119, 1582259, "nvc:[driver]", None),
        "pid=876767": (145, 876767, "ray::WorkerDict", None),
        # R570+: neither
        "19:14:43": (13, None, None, None),
        # before R515: pid alone
        "pid=1896": (63, 1896, None, "Row Remapper: New row marked for remapping, reset gpu to activate."),  # noqa: E501
        "Uncontained: FBHUB": (95, 5171, None, "Uncontained: FBHUB. RST: Yes, D-RST: No"),
    }  # fmt: skip
    for needle, (code, pid, process, message) in cases.items():
        event = on("pid_name_eras.log", needle)
        assert (event.code, event.pid, event.process) == (code, pid, process), needle
        assert message is None or event.message == message, needle
        assert "pid=" not in event.message and "name=" not in event.message, needle


def test_a_process_name_with_a_space() -> None:
    # formats.md quotes a 580-era report `pid=6540, name=KMS thread, GPU has fallen off the bus`
    # (line-wrapped in its source); rendered with the R570+ printf around that fragment.
    line = PLAIN_FORMAT % (0, 1, 0, 79, "6540", "KMS thread", "GPU has fallen off the bus.", "")
    [event] = parse_kernel_log([line])
    assert (event.pid, event.process, event.message) == (
        6540,
        "KMS thread",
        "GPU has fallen off the bus.",
    )


def test_gpu_at_maps_in_log_order_and_a_remap_replaces_it() -> None:
    events = xids("gpu_at.log")
    uuids = [(e.code, e.process, e.gpu_uuid) for e in events]
    assert uuids == [
        (14, None, "GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7"),  # old `GPU at 0000:03:00:` form
        (48, "nv-hostengine", "GPU-455d8f70-2051-db6c-0430-ffc457bff834"),  # remapped
        (119, "python", None),  # before 9b:00's mapping line: it does not apply backwards
        (119, "cache_mgr_main", None),
        (119, "gpu-feature-dis", None),
        (119, "nvidia-smi", "GPU-509665ad-b600-ac93-3616-d754b23d636d"),
        (79, None, "GPU-c4a80165-86e4-bfbb-ecfa-1d81a70b138a"),
    ]


def test_gpu_at_lines_that_are_not_mappings() -> None:
    # `GPU at 0000:01:00.0 has software scheduler …` and `… has fallen off the bus.` name no UUID.
    text = [line for line in lines("gpu_at.log") if "NVRM: GPU at " in line]
    assert [gpu_at(line) for line in text if " has " in line] == [None, None]
    [mapping] = [line for line in text if "GPU at PCI:0000:01:00" in line]
    assert gpu_at(mapping) == ("0000:01:00", "GPU-c4a80165-86e4-bfbb-ecfa-1d81a70b138a")
    lost = on("gpu_at.log", "): 79, ")
    assert lost.gpu_uuid == "GPU-c4a80165-86e4-bfbb-ecfa-1d81a70b138a"  # the PCI: line before


def test_fallen_off_the_bus_with_and_without_an_xid() -> None:
    text = lines("fallen_off_bus.log")
    events = xids("fallen_off_bus.log")
    expected = [
        # Xid 79 then the driver's own line for the same GPU: one event
        (79, "0000:04:00", "xid", "04:00): 79, GPU has fallen off the bus."),
        (154, "0000:04:00", "xid", "0x2 (Node Reboot Required)"),
        (79, "0000:01:00", "xid", "01:00): 79, GPU has fallen off the bus."),  # old closed driver
        (79, "0000:05:00", "xid", "e=<unknown>, GPU has fallen off the bus."),
        # probe time, three lines: the event is the line naming the GPU
        (79, "0000:b3:00", "fallen_off_bus", "NVRM: The NVIDIA GPU 0000:b3:00.0"),
        # no Xid at all: every line is the GPU lost again (hours after the 01:00 Xid 79 above)
        (79, "0000:01:00", "fallen_off_bus", "RM: GPU at 0000:01:00.0 has fallen off the bus."),
        (79, "0000:01:00", "fallen_off_bus", "RM: GPU at 0000:01:00.0 has fallen off the bus."),
        (79, "0000:01:00", "fallen_off_bus", "RM: GPU at 0000:01:00.0 has fallen off the bus."),
        (79, "0000:01:00", "fallen_off_bus", "RM: GPU at 0000:01:00.0 has fallen off the bus."),
        (79, "0000:29:00", "fallen_off_bus", "0000:29:00.0: GPU has fallen off the bus."),
        (79, "0000:18:00", "fallen_off_bus", "GPU 18:00.0: GPU has fallen off the bus."),
    ]  # fmt: skip
    assert len(events) == len(expected)
    for event, (code, pci, source, ends) in zip(events, expected, strict=True):
        assert (event.code, event.pci_bus_id, event.source) == (code, pci, source)
        assert text[event.line - 1].strip().endswith(ends), (event.line, ends)
    lost = [e for e in xids("fallen_off_bus.log") if e.source == "fallen_off_bus"]
    info = load_catalog().lookup(79)
    assert all(e.fault_class == info.fault_class and e.pid is None for e in lost)


def test_the_probe_time_message_as_one_kmsg_record() -> None:
    """The driver prints the three lines of its probe-time message in one call: /dev/kmsg
    keeps them as ONE record, its newlines escaped as ``\\x0a`` (rsyslog writes ``#012``).
    The message is NVSentinel#155's (fallen_off_bus.log), as kmsg and rsyslog store it."""
    text = lines("fallen_off_bus.log")
    start = next(i for i, line in enumerate(text) if "The NVIDIA GPU 0000:b3:00.0" in line)
    parts = [text[start + k].split("NVRM: ", 1)[1] for k in range(3)]
    for newline, prefix in (("\\x0a", "6,1843,1843308145,-;"), ("#012", "node1 kernel: ")):
        record = prefix + newline.join(f"NVRM: {part}" for part in parts)
        [event] = parse_kernel_log([record])
        assert (event.code, event.pci_bus_id, event.source) == (79, "0000:b3:00", "fallen_off_bus")
        assert event.action is XidAction.REBOOT


def test_sxid_fatality_and_follow_up_lines() -> None:
    events = parse_sxids(lines("sxid.log"))
    got = [(e.switch, e.pci_bus_id, e.code, e.fatality, e.link) for e in events]
    assert got == [
        ("nvswitch0", "0000:c3:00", 24007, Fatality.FATAL, 28),
        ("nvswitch0", "0000:c3:00", 24007, Fatality.FATAL, 30),
        ("nvswitch0", "0000:00:00", 20034, Fatality.FATAL, 30),
        ("nvswitch3", "0000:08:00", 22013, Fatality.NON_FATAL, 60),  # its Severity/Data: no events
        ("nvswitch3", "0000:c1:00", 28006, Fatality.NON_FATAL, 46),
        ("nvswitch0", "0000:06:00", 20009, Fatality.NON_FATAL, 4),
        # (a lone `12033, Severity 1 …` dump line: no event)
        ("nvswitch3", "0000:05:00", 12028, Fatality.NON_FATAL, 32),
        ("nvswitch2", "0000:07:00", 22013, Fatality.NON_FATAL, 47),
        ("nvswitch0", "0004:00:00", 26008, Fatality.UNKNOWN, None),  # no Fatal/Non-fatal word
        ("nvswitch0", "0004:00:00", 26006, Fatality.UNKNOWN, None),
        ("nvswitch0", "0004:00:00", 26007, Fatality.UNKNOWN, None),  # then 26006's HALT dump
    ]
    fatal, non_fatal, unknown = events[0], events[3], events[-1]
    assert (fatal.action, fatal.severity) == (XidAction.REBOOT, Severity.CRITICAL)
    assert (non_fatal.action, non_fatal.severity) == (XidAction.IGNORE, Severity.INFO)
    assert (unknown.action, unknown.severity) == (XidAction.CONTACT_SUPPORT, Severity.CRITICAL)
    assert fatal.message == "Link 28 sourcetrack timeout error (First)"
    assert fatal.uptime_s == 1108.858286
    assert parse_kernel_log(lines("sxid.log")) == []  # an SXid is never an Xid


def test_nvlink5_and_74_lines_keep_their_payload_for_the_decoder() -> None:
    events = xids("nvlink5.log")
    assert {e.code for e in events} == {74, 144, 145, 149}
    assert {e.pci_bus_id for e in events if e.code == 149} >= {"0008:01:00", "0018:01:00"}
    remap = on("nvlink5.log", "0x00000082 0x00000040")
    assert remap.message.startswith("RLW_REMAP Fatal XC1 i0 Link 10 (0x00000082 0x00000040")
    assert on("nvlink5.log", "): 74, ").message.endswith(
        "link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
    )
    # The reporter redacted `(PCI:...)`: no address, no event (no GPU to blame).
    assert all("PCI:..." not in lines("nvlink5.log")[e.line - 1] for e in events)


def test_xid154_and_xid45_messages_are_kept_whole() -> None:
    reboot = on("xid154.log", "0000:02:00): 154")
    assert (
        reboot.message
        == "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    )
    assert [e.code for e in xids("xid154.log")] == [79, 154, 79, 154, 154, 154, 154, 154, 154]
    caused = on("xid45.log", "0000:dc:00")
    assert caused.message == "Ch 00000001 caused by previous Xid 149"
    assert on("xid45.log", "Ch 00000009").message == "Ch 00000009"


def test_collector_prefixes() -> None:
    assert on("prefixed.log", "jambi").uptime_s == 176830.774761  # syslog + dmesg uptime
    kmsg = [e for e in xids("prefixed.log") if lines("prefixed.log")[e.line - 1].startswith("<4>")]
    assert [e.uptime_s for e in kmsg] == [16450.076098, 16450.076106]  # /proc/kmsg
    ctime = on("prefixed.log", "[Wed Jul 31")  # dmesg -T: local time, no year zone; not guessed
    assert (ctime.timestamp, ctime.uptime_s) == (None, None)
    assert on("prefixed.log", "Kyrios").gpu_uuid == "GPU-751acba2-df95-76f6-5914-58abf0c3cba3"


def test_every_event_carries_the_decoders_final_action() -> None:
    catalog = load_catalog()
    for path in FILES:
        for event in parse_kernel_log(path.read_text().splitlines()):
            decoded = decode_action(catalog.lookup(event.code), event.message)
            if event.code == 45 and "follows Xid" in event.action_reason:
                continue  # a 45 right after another Xid: test_xid45_after_another_xid_is_not_solo
            assert (event.action, event.action_reason) == (decoded.action, decoded.reason)
            assert event.recommended_action == event.action.value


def test_a_line_another_program_wrote_is_never_the_driver() -> None:
    """A syslog file holds what any program logs: `logger` run by any user, or an agent that
    echoes the lines it saw. Only the kernel's own lines are the driver's (a forged copy of a
    real line from prefixed.log, tagged by two other programs)."""
    real = next(line for line in lines("prefixed.log") if " Kyrios kernel: NVRM: Xid" in line)
    assert [e.code for e in parse_kernel_log([real])] == [120]
    for forger in ("alice", "gpud[4242]"):
        assert parse_kernel_log([real.replace(" kernel: ", f" {forger}: ")]) == []
    sxid = next(line for line in lines("sxid.log") if "SXid" in line and not line.startswith("#"))
    assert parse_sxids([f"Dec  1 03:00:00 node1 alice: {sxid}"]) == []


def test_xid45_after_another_xid_is_not_solo() -> None:
    """A 45 the driver does not explain (before 570.123.01) right after another Xid on its GPU
    is that Xid's cleanup: NVIDIA's WORKFLOW_XID_45 "Not Solo: IGNORE"; alone it is solo."""
    after_62 = [e for e in xids("xid45.log") if e.pci_bus_id == "0000:0a:00"]
    assert [(e.code, e.action) for e in after_62] == [
        (31, XidAction.RESTART_APP),
        (62, XidAction.RESET_GPU),
        (45, XidAction.IGNORE),
        (45, XidAction.IGNORE),
    ]
    assert "follows Xid 62" in after_62[2].action_reason
    assert after_62[2].severity is Severity.INFO
    alone = parse_kernel_log([lines("xid45.log")[after_62[2].line - 1]])
    assert [e.action for e in alone] == [XidAction.RESTART_FABRIC_MANAGER]


def test_comment_lines_are_never_events() -> None:
    for path in FILES:
        text = path.read_text().splitlines()
        for event in scan_kernel_log(text):
            assert not text[event.line - 1].startswith("#"), (path.name, event.line)


class SpyCatalog(XidCatalog):
    """The real catalog, remembering which architecture each lookup asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int | None]] = []

    def lookup(self, code: int, architecture: int | None = None) -> XidInfo:
        self.asked.append((code, architecture))
        return load_catalog().lookup(code, architecture)


def test_architecture_per_gpu() -> None:
    spy = SpyCatalog()
    events = parse_kernel_log(lines("prefixed.log"), spy, architecture={"00000000:07:00.0": 5})
    assert len(events) == len(spy.asked)
    assert [asked for asked in spy.asked if asked[1] is not None] == [(48, 5), (64, 5)]
    one = SpyCatalog()
    parse_kernel_log(lines("mig.log"), one, architecture=7)  # one architecture for every GPU
    assert one.asked == [(94, 7), (94, 7), (95, 7)]


def test_remedy_xid_parse_shows_every_family() -> None:
    mixed = str(DATA / "mixed.log")
    result = CliRunner().invoke(app, ["xid", "parse", mixed])
    assert result.exit_code == 0, result.output
    got = result.output.splitlines()
    assert got[0].startswith("line 10: Xid 94 on 0000:01:00 GPU-I:05 pid=7194: memory → ")
    assert got[1].startswith(
        "line 15: Xid 14 on 0000:03:00 GPU-b850f46d-d5ea-c752-ddf3-c4453e44d3f7:"
    )
    assert got[2].startswith("line 19: Xid 43 on 0009:01:00 pid=3188489 process=trigger_xid: ")
    assert got[3] == (
        "line 23: SXid 24007 fatal on nvidia-nvswitch0 (PCI 0000:c3:00): "
        "Link 28 sourcetrack timeout error (First) → reboot"
    )
    assert got[4].startswith("line 27: SXid 22013 non-fatal on nvidia-nvswitch3 (PCI 0000:08:00)")
    assert got[5].startswith("line 33: Xid 79 on 0000:04:00: bus → ")  # its driver line: same event
    assert got[6].startswith("line 36: Xid 154 on 0000:04:00: ")
    assert got[7].startswith(
        "line 40: Xid 79 (GPU fell off the bus, no Xid line) on 0000:b3:00: bus → "
    )
    assert len(got) == 8
    events = scan_kernel_log(lines("mixed.log"))
    for text, event in zip(got, events, strict=True):  # the final action and its reason
        action = (
            f"→ {event.action}"
            if isinstance(event, SXidEvent)
            else f"→ {event.action} ({event.action_reason})"
        )
        assert text.endswith(action)


def test_remedy_xid_parse_json_names_the_kind() -> None:
    result = CliRunner().invoke(app, ["xid", "parse", str(DATA / "mixed.log"), "--json"])
    assert result.exit_code == 0, result.output
    objects = [json.loads(line) for line in result.output.splitlines()]
    assert [(o["kind"], o["code"]) for o in objects] == [
        ("xid", 94), ("xid", 14), ("xid", 43), ("sxid", 24007), ("sxid", 22013),
        ("xid", 79), ("xid", 154), ("xid", 79),
    ]  # fmt: skip
    assert objects[0]["gpu_instance"] == 5 and objects[3]["fatality"] == "fatal"
    assert objects[-1]["source"] == "fallen_off_bus"


# -- never raises --------------------------------------------------------------------------------
REAL = [line for path in FILES for line in path.read_text().splitlines() if line.strip()]
mutated = st.builds(
    lambda line, at, junk: line[:at] + junk + line[at:],
    st.sampled_from(REAL),
    st.integers(0, 200),
    st.text(max_size=12),
)
cut = st.builds(lambda line, at: line[:at], st.sampled_from(REAL), st.integers(0, 200))


@settings(
    max_examples=150,
    deadline=timedelta(seconds=1),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.one_of(st.sampled_from(REAL), mutated, cut, st.text(max_size=80)), max_size=25))
def test_scanning_any_mix_of_real_broken_and_random_lines_never_raises(batch: list[str]) -> None:
    events = scan_kernel_log(batch)
    assert all(1 <= e.line <= len(batch) for e in events)
    assert [e.line for e in events] == sorted(e.line for e in events)
