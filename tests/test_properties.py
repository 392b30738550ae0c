"""Property tests: whatever a person or a kernel writes, the parsers answer (runbooks or a
RunbookError, Xid events, an Attribution) and never crash or hang. Bounded: a deadline per
example and few examples, so the whole module runs in seconds."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from remedy.attribution.model import (
    Attribution,
    PodFailure,
    RemediationSeen,
    Termination,
    Verdict,
    XidSeen,
)
from remedy.attribution.rules import Attributor
from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.runbook import Runbook, RunbookError, load_runbooks
from remedy.xid import load_catalog, parse_kernel_log

BOUNDED = settings(
    max_examples=60,
    deadline=timedelta(seconds=1),
    database=None,  # no .hypothesis folder in the tree; a failure prints its example
    suppress_health_check=[HealthCheck.too_slow],
)


def load_text(text: str) -> list[Runbook] | RunbookError:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runbook.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_runbooks([path])
        except RunbookError as exc:
            assert exc.problems, "a RunbookError names at least one problem"
            return exc


# -- runbooks ----------------------------------------------------------------------------------
# Pieces of YAML, runbooks and their values, so that generated text reaches past the scanner.
YAML_PIECES = [
    "name: ", "match:", "xids: ", "checks: ", "reasons: ", "severities: ", "ladder:",
    "action: ", "timeout: ", "retry:", "max_attempts: ", "backoff: ", "tolerance: ",
    "recheck_every: ", "cause: ", "priority: ", "approval: ", "verify: ", "settle: ",
    "gpu-ecc", "reset_gpu", "reboot", "replace", "drain", "xid", "Xid48", "memory",
    "EccUncorrectable", "critical", "application", "10m", "1h30m", "-5s", "1e999", ".inf",
    ".nan", "-.inf", "999999999999999999999d", "2024-02-30", "2024-01-01 10:00:00", "0x1F",
    "0o7", "~", "null", "true", "yes", "[", "]", "{", "}", ",", ": ", "- ", "? ", "&a ", "*a",
    "&b ", "*b", "<<: ", "!!int ", "!!float ", "!!timestamp ", "!!binary ", "!!set ",
    "!!python/object:os.system ", "!custom ", "|", ">", "'", '"', "#", "---", "...", "%YAML 1.1",
    "\n", "\n  ", "\n    ", "\t", " ", "\x00", "\x01", "\ufeff", "é", "48", "-1", "0",
]  # fmt: skip
yaml_soup = st.lists(st.sampled_from(YAML_PIECES), max_size=40).map("".join)

FIELDS = [
    "name", "description", "match", "cause", "priority", "cordon", "tolerance", "recheck_every",
    "ladder", "checks", "xids", "reasons", "severities", "action", "timeout", "retry", "settle",
    "verify", "approval", "approval_timeout", "max_attempts", "initial_interval", "backoff",
    "max_interval", "unknown",
]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and ±inf included: `.inf` is valid YAML
    st.text(max_size=20),
    st.sampled_from(["10m", "1h30m", "0s", "-1s", "reset_gpu", "replace", "xid", "Xid48"]),
)
structures = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(FIELDS), inner, max_size=5),
    ),
    max_leaves=25,
)


@BOUNDED
@given(yaml_soup)
# What this found, kept: a character YAML forbids (ReaderError), a value its type cannot hold
# (ValueError, IndexError, KeyError from PyYAML's constructors), a duration past timedelta's
# range (OverflowError) — each escaped the loader as a traceback.
@example("\x00")
@example("name: x\n\x1f")
@example("!!int ")
@example("a: 2024-02-30")
@example("a: !!bool maybe")
@example("a: !!timestamp soon")
@example("name: r\nmatch: {xids: [48]}\ntolerance: .inf\n")
@example("name: r\nmatch: {xids: [48]}\ntolerance: 999999999999999999999d\n")
@example("name: r\nmatch: {xids: [48]}\nladder: [{action: reboot, timeout: .nan}]\n")
def test_any_text_is_runbooks_or_a_runbook_error(text: str) -> None:
    load_text(text)


@BOUNDED
@given(st.text(max_size=300))
def test_any_unicode_is_runbooks_or_a_runbook_error(text: str) -> None:
    load_text(text)


@BOUNDED
@given(structures)
def test_any_structure_is_runbooks_or_a_runbook_error(data: Any) -> None:
    load_text(yaml.safe_dump(data, allow_unicode=True))


@BOUNDED
@given(
    st.fixed_dictionaries(
        {"name": st.just("r"), "match": st.fixed_dictionaries({"xids": st.just([48])})},
        optional={
            "tolerance": scalars,
            "recheck_every": scalars,
            "priority": scalars,
            "ladder": st.lists(
                st.fixed_dictionaries(
                    {"action": st.sampled_from(["reset_gpu", "reboot", "replace", "cordon"])},
                    optional={"timeout": scalars, "settle": scalars, "retry": structures},
                ),
                max_size=3,
            ),
        },
    )
)
def test_a_nearly_right_runbook_is_one_or_a_runbook_error(data: dict[str, Any]) -> None:
    load_text(yaml.safe_dump(data, allow_unicode=True))


# -- the kernel log ----------------------------------------------------------------------------
hexes = st.text("0123456789abcdefABCDEF", min_size=0, max_size=5)
prefixes = st.sampled_from(
    ["", "kernel: ", "[  12.5] ", "[bad] ", "6,4411,103859498995,-;", "6,1,x,-;",
     "2026-11-29T07:37:09+00:00 gpu-07 kernel: ", "2026-13-45T99:99:99+00:00 h kernel: ",
     "9999-12-31T23:59:59-23:59 h kernel: "]
)  # fmt: skip
xid_lines = st.builds(
    lambda prefix, pci, code, rest: f"{prefix}NVRM: Xid ({pci}): {code}{rest}",
    prefixes,
    st.builds(
        lambda pci, dom, bus, dev, fn: f"{pci}{dom}:{bus}:{dev}{fn}",
        st.sampled_from(["PCI:", "", "pci:"]),
        hexes,
        hexes,
        hexes,
        st.sampled_from(["", ".0", ".f", ".", ".zz"]),
    ),
    st.one_of(st.integers(-10, 100_000), st.text("0123456789", max_size=6)),
    st.one_of(
        st.just(""),
        st.text(max_size=40).map(lambda s: ", " + s),
        st.builds(
            lambda pid, name, msg: f", pid={pid}, name={name}, {msg}",
            st.one_of(st.integers(-5, 10**20), st.sampled_from(["'<unknown>'", "<unknown>", ""])),
            st.text(max_size=10),
            st.text(max_size=20),
        ),
    ),
)
gpu_at_lines = st.builds(
    lambda prefix, pci, uuid: f"{prefix}NVRM: GPU at PCI:{pci}: GPU-{uuid}",
    prefixes,
    st.sampled_from(["0000:5a:00.0", "0000:5A:00", "zz", "0000:5a:00"]),
    st.text("0123456789abcdef-", max_size=36),
)


@BOUNDED
@given(st.lists(st.text(max_size=200), max_size=20), st.integers(-5, 20) | st.none())
def test_any_lines_parse_without_raising(lines: list[str], architecture: int | None) -> None:
    events = parse_kernel_log(lines, architecture=architecture)
    assert all(1 <= e.line <= len(lines) for e in events)


@BOUNDED
@given(st.lists(st.one_of(xid_lines, gpu_at_lines, st.text(max_size=80)), max_size=20))
def test_xid_shaped_lines_parse_without_raising(lines: list[str]) -> None:
    events = parse_kernel_log(lines)
    assert all(1 <= e.line <= len(lines) for e in events)


# -- attribution -------------------------------------------------------------------------------
ATTRIBUTOR = Attributor()
CODES = [*load_catalog().codes(), 0, 999, -1]
# Aware, as every producer gives them (the Kubernetes API, Temporal, the kernel log's ISO times).
times = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-9))]))
short = st.text(max_size=12)
nodes = st.sampled_from(["n1", "n2", ""]) | short
xids_seen = st.builds(
    XidSeen,
    code=st.sampled_from(CODES) | st.integers(),
    gpu=st.sampled_from(["SN-A", "SN-B"]) | short,
    node=nodes,
    at=times,
    pid=st.none() | st.integers(),
    process=st.none() | short,
    job=st.none() | st.sampled_from(["job", "other"]) | short,
)
findings = st.builds(
    Finding,
    node=nodes,
    check=st.sampled_from(["xid", "memory", "nic", "probe"]) | short,
    reason=short,
    severity=st.sampled_from(Severity),
    component=st.builds(
        Component, kind=st.sampled_from(ComponentKind), index=st.none() | st.integers()
    ),
    xid=st.none() | st.sampled_from(CODES),
    observed_at=times,
)
remediations = st.builds(
    RemediationSeen,
    node=nodes,
    runbook=short,
    cause=st.sampled_from(["platform", "application"]) | short,
    started_at=times,
    ended_at=st.none() | times,
    outcome=short,
)
failures = st.builds(
    PodFailure,
    job=st.sampled_from(["job", "other"]) | short,
    pod=short,
    node=nodes,
    failed_at=times,
    termination=st.builds(
        Termination,
        exit_code=st.none() | st.integers(),
        reason=st.sampled_from(["Error", "OOMKilled", "NodeLost", "Evicted", ""]) | short,
        disruption=st.none() | st.sampled_from(["EvictionByEvictionAPI", "PreemptionByScheduler"]),
        message=short,
    ),
    log_tail=st.text(max_size=200)
    | st.sampled_from(["uncorrectable ECC error", "NCCL timeout", "Traceback", "CUDA error"]),
    node_gone=st.booleans(),
    findings=st.lists(findings, max_size=3),
    remediations=st.lists(remediations, max_size=3),
    xids=st.lists(xids_seen, max_size=4),
    xid_history=st.lists(xids_seen, max_size=4),
)


@BOUNDED
@given(failures)
def test_any_failure_gets_an_attribution(failure: PodFailure) -> None:
    got = ATTRIBUTOR.attribute(failure)
    assert isinstance(got, Attribution)
    assert got.verdict in Verdict
    assert got.blame in (None, failure.node)


def test_times_far_apart_still_compare() -> None:
    """The window around a failure at the end of the calendar: a sum would overflow."""
    end = datetime.max.replace(tzinfo=UTC)
    failure = PodFailure(
        job="job",
        pod="p",
        node="n1",
        failed_at=end,
        termination=Termination(exit_code=1, reason="Error"),
        xids=[XidSeen(code=79, gpu="SN-A", node="n1", at=end)],
    )
    assert ATTRIBUTOR.attribute(failure).verdict is Verdict.PLATFORM
