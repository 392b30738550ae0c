"""From NVIDIA's action for an Xid to the runbook that answers it.

Every catalogued code reaches a runbook its action calls for, or no remediation at all for an
ignore, never the built-in cordon-and-hold default; Xid 154 is routed by the recovery its line
asks for; an application's Xid (on a MIG instance too) costs the node nothing and reaches the
job guard as the job's own; a fatal NVSwitch error gets the nvswitch ladder. End to end, with
the real workflows: tests/test_xid_end_to_end.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from remedy.attribution.evidence import PodRun, RecentXid, recent_xid, tie_xids
from remedy.attribution.model import PodFailure, Termination, Verdict
from remedy.attribution.rules import Attributor
from remedy.core.models import Action, Component, ComponentKind, Finding, Severity
from remedy.detection.probe.sxids import sxid_findings
from remedy.detection.probe.xids import xid_findings
from remedy.runbook import DEFAULT_RUNBOOK, Runbook, RunbookError, RunbookSet, Rung, load_runbooks
from remedy.runbook.advice import AGREES, disagreements, first_effective_rung, matched_xids
from remedy.runbook.explain import describe_match
from remedy.runbook.matcher import with_nvidia_action
from remedy.runbook.schema import FROM_CONDITION, Match, json_schema
from remedy.xid.actions import SEVERITY, XidAction
from remedy.xid.catalog import load_catalog
from remedy.xid.kernel_log import parse_kernel_log
from remedy.xid.nvswitch import parse_sxids

AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)

# NVIDIA's action → the shipped runbooks that may answer it (None: no remediation). A code a
# runbook names by number goes to that runbook; tests/test_runbooks_nvidia.py checks that its
# ladder agrees with NVIDIA there.
EXPECTED: dict[XidAction, set[str | None]] = {
    XidAction.IGNORE: {None},
    XidAction.RESTART_APP: {"application-xid", "hung-job"},
    XidAction.RESET_GPU: {
        "gpu-reset-class",
        "gpu-memory-ecc",
        "gpu-row-remap-failure",
        "gpu-gsp",
        "nvlink",
    },
    XidAction.REBOOT: {"driver-requests-reboot", "gpu-fallen-off-bus"},
    XidAction.RESTART_VM: {"driver-requests-reboot", "gpu-fallen-off-bus"},
    XidAction.RESTART_FABRIC_MANAGER: {"xid-fabric-manager"},
    XidAction.CONTACT_SUPPORT: {"xid-needs-a-person"},
    XidAction.CHECK_MECHANICALS: {"xid-needs-a-person"},
    XidAction.UPDATE_SOFTWARE: {"xid-needs-a-person"},
}
ARCHITECTURES = (None, 5, 7, 9, 10)  # unknown, Volta, Ampere, Hopper, Blackwell

# Real lines (tests/data/xid/*.log and /work/xid-research/corpus.txt name their sources).
# NVIDIA's A100 example of a contained ECC error inside MIG instance 5 (open-gpu-kernel-modules
# kern_gpu_error_cont_ga100.c, and NVIDIA's "A100 GPU memory error management" page).
MIG_APP_XID = (
    "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). "
    "RST: No, D-RST: No"
)
# eGPU journal, driver 595.71.05: the driver's osHandleGpuLost sequence ends in this 154.
NODE_REBOOT_154 = (
    "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
    "(Node Reboot Required)"
)
# leptonai/gpud kmsg_test.go (GB200 capture): the driver asks for a GPU reset.
GPU_RESET_154 = (
    "[171167.897562] NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 "
    "(Drain and Reset) to 0x1 (GPU Reset Required)"
)
# The driver's own format (gpu.c, _gpuRefreshRecoveryActionInLock: "GPU recovery action changed
# from 0x%x (%s) to 0x%x (%s)") for the change back to no recovery, 0x0 "None" (decoding.md §1:
# a real state change, e.g. after a reset); no capture of one was found.
NONE_154 = (
    "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x1 "
    "(GPU Reset Required) to 0x0 (None)"
)
# NVSentinel sxid_handler_test.go and a field capture on an HGX node (tests/data/xid/sxid.log).
FATAL_SXID = (
    "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 "
    "sourcetrack timeout error (First)"
)
NON_FATAL_SXID = (
    "[  117.984502] nvidia-nvswitch3: SXid (PCI:0000:08:00.0): 22013, Non-fatal, Link 60 "
    "Minion Link DLREQ interrupt"
)


def xid_finding(code: int, action: XidAction | None, architecture: int | None = None) -> Finding:
    info = load_catalog().lookup(code, architecture)
    return Finding(
        node="gpu-node-001",
        check="xid",
        reason=f"Xid{code}",
        severity=SEVERITY[action] if action else info.severity,
        component=Component(kind=ComponentKind.GPU, index=0, architecture=architecture),
        xid=code,
        observed_at=AT,
        nvidia_action=action.value if action else None,
    )


def routed(runbooks: RunbookSet, finding: Finding) -> str | None:
    runbook = runbooks.match(finding)
    return runbook.name if runbook else None


def from_log(*lines: str) -> list[Finding]:
    return xid_findings("gpu-node-001", parse_kernel_log(lines), not_before=None, now=AT)


# -- every action, every catalogued code ---------------------------------------------------
def test_every_action_has_its_runbooks_in_the_shipped_set(shipped_runbooks: RunbookSet) -> None:
    assert set(EXPECTED) == set(XidAction)
    names = {r.name for r in shipped_runbooks}
    for action, expected in EXPECTED.items():
        assert expected - {None} <= names, action
        # Each answers with what NVIDIA does first (a person's actions: nothing disruptive).
        for name in expected - {None}:
            assert first_effective_rung(shipped_runbooks.get(name)) in AGREES[action] | {
                Action.KILL_JOB  # hung-job stops the wedged job: NVIDIA's restart the app
            }, (action, name)


@pytest.mark.parametrize("action", list(XidAction))
def test_an_xid_154_goes_where_its_action_says(
    shipped_runbooks: RunbookSet, action: XidAction
) -> None:
    """154 is named only with reboot: every other action it can carry routes as a class."""
    assert routed(shipped_runbooks, xid_finding(154, action)) in EXPECTED[action]


def test_every_catalogued_code_reaches_a_runbook_or_no_remediation(
    shipped_runbooks: RunbookSet,
) -> None:
    catalog = load_catalog()
    named = {x: r.name for r in shipped_runbooks for x in matched_xids(r)}
    assert len(catalog.codes()) >= 172
    for code in catalog.codes():
        for arch in ARCHITECTURES:
            action = catalog.lookup(code, arch).action
            for finding in (xid_finding(code, action, arch), xid_finding(code, None, arch)):
                runbook = shipped_runbooks.match(finding)
                assert runbook is not DEFAULT_RUNBOOK, (code, arch)
                name = runbook.name if runbook else None
                assert name in EXPECTED[action] or name == named.get(code), (code, arch, name)


def test_an_ignore_is_informational_and_never_remediated(shipped_runbooks: RunbookSet) -> None:
    catalog = load_catalog()
    ignored = [c for c in catalog.codes() if catalog.lookup(c).action is XidAction.IGNORE]
    assert {43, 63, 92} <= set(ignored)
    for code in ignored:
        finding = xid_finding(code, XidAction.IGNORE)
        assert not finding.unhealthy and shipped_runbooks.match(finding) is None, code


def test_an_ignore_decoded_from_a_named_code_is_not_remediated(
    shipped_runbooks: RunbookSet,
) -> None:
    """nvlink names Xid 74; a 74 whose registers NVIDIA says to ignore still starts nothing."""
    assert routed(shipped_runbooks, xid_finding(74, XidAction.RESET_GPU)) == "nvlink"
    assert shipped_runbooks.match(xid_finding(74, XidAction.IGNORE)) is None


def test_an_action_the_line_decided_goes_by_the_action_not_the_code(
    shipped_runbooks: RunbookSet,
) -> None:
    """nvlink names Xid 74 for its usual reset; a 74 whose registers NVIDIA says to report
    (contact support) goes to a person — never drain, reset and reboot."""
    assert routed(shipped_runbooks, xid_finding(74, XidAction.RESET_GPU)) == "nvlink"
    assert routed(shipped_runbooks, xid_finding(74, XidAction.CONTACT_SUPPORT)) == (
        "xid-needs-a-person"
    )
    # A clause naming the code and the action still wins (154 asking for a reboot).
    assert routed(shipped_runbooks, xid_finding(154, XidAction.REBOOT)) == "driver-requests-reboot"


def test_a_finding_without_an_action_gets_the_catalogs(shipped_runbooks: RunbookSet) -> None:
    """An older agent's, an NVML event's, or one the fleet scan rebuilt from a condition."""
    assert with_nvidia_action(xid_finding(68, None)).nvidia_action == "restart_app"
    rebuilt = xid_finding(68, None).model_copy(update={"check": FROM_CONDITION})
    assert routed(shipped_runbooks, rebuilt) == "application-xid"
    # What the line asked for is gone there: Xid 154 falls to the catalog's (a person).
    rebuilt_154 = xid_finding(154, None).model_copy(update={"check": FROM_CONDITION})
    assert routed(shipped_runbooks, rebuilt_154) == "xid-needs-a-person"


def test_an_action_clause_is_as_specific_as_a_reason_and_an_xid_beats_it() -> None:
    assert Match(nvidia_actions=[XidAction.REBOOT]).specificity == 4
    assert Match(xids=[154], nvidia_actions=[XidAction.REBOOT]).specificity == 12
    assert not Match(nvidia_actions=[XidAction.REBOOT]).matches(xid_finding(154, None))


def test_advice_reports_an_action_clause_whose_ladder_does_otherwise() -> None:
    rash = Runbook(
        name="rash",
        match=[Match(nvidia_actions=[XidAction.RESTART_APP])],
        ladder=[Rung(action=Action.REBOOT)],
    )
    [problem] = disagreements(rash, load_catalog())
    assert "restart_app" in problem and "reboot" in problem


# -- Xid 154 from its real lines --------------------------------------------------------
def test_xid_154_node_reboot_required_goes_to_the_reboot_ladder(
    shipped_runbooks: RunbookSet,
) -> None:
    [finding] = from_log(NODE_REBOOT_154)
    assert (finding.nvidia_action, finding.severity) == ("reboot", Severity.CRITICAL)
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "driver-requests-reboot"
    assert first_effective_rung(runbook) is Action.REBOOT
    assert "Node Reboot Required" in finding.evidence


def test_xid_154_none_is_informational_and_goes_nowhere(shipped_runbooks: RunbookSet) -> None:
    [finding] = from_log(NONE_154)
    assert (finding.nvidia_action, finding.severity) == ("ignore", Severity.INFO)
    assert shipped_runbooks.match(finding) is None


def test_xid_154_gpu_reset_required_goes_to_the_reset_ladder(
    shipped_runbooks: RunbookSet,
) -> None:
    [finding] = from_log(GPU_RESET_154)
    assert routed(shipped_runbooks, finding) == "gpu-reset-class"


# -- an application's Xid on a MIG instance -----------------------------------------------
def test_an_application_xid_on_a_mig_instance_never_cordons(shipped_runbooks: RunbookSet) -> None:
    [finding] = from_log(MIG_APP_XID)
    assert (finding.xid, finding.nvidia_action) == (94, "restart_app")
    assert "MIG GPU-I 5" in finding.evidence and finding.pid == 7194
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "application-xid"
    assert runbook.cordon is False
    assert {r.action for r in runbook.ladder} == {Action.DIAGNOSE}


def test_the_mig_xid_is_the_jobs_own_evidence_for_its_guard() -> None:
    """As the job watch builds it: the agent keeps the Xid on its node (recent_xid), the watch
    ties it to the job whose pod held the GPUs, the rules read it (test_attribution's
    ``app-xid-once`` case)."""
    [finding] = from_log(MIG_APP_XID)
    kept = recent_xid(finding)
    assert kept is not None and kept.action == "restart_app"
    attribution = Attributor().attribute(failed_with(kept))
    assert (attribution.verdict, attribution.rule) == (Verdict.APPLICATION, "app-xid-once")
    assert attribution.blame is None  # the node is not blamed


def test_an_xid_154_none_is_not_a_hardware_xid_for_the_guard() -> None:
    """The catalog calls 154 contact support; the line said the driver needs nothing."""
    [finding] = from_log(NONE_154)
    kept = recent_xid(finding)
    assert kept is not None
    assert Attributor().attribute(failed_with(kept)).rule != "hardware-xid-during-run"


def failed_with(kept: RecentXid) -> PodFailure:
    """A rank of a job that held all the node's GPUs failed 5 s after the node kept ``kept``:
    the Xid tied to that job, as the job watch builds it."""
    pod = PodRun(job="ml/llm-pretrain", gpus=8, started_at=AT - timedelta(hours=1))
    return PodFailure(
        job="ml/llm-pretrain",
        pod="llm-pretrain-worker-3",
        node="gpu-node-001",
        failed_at=AT + timedelta(seconds=5),
        termination=Termination(exit_code=1, reason="Error"),
        xids=tie_xids("gpu-node-001", [kept], [pod]),
    )


# -- NVSwitch ---------------------------------------------------------------------------
def test_a_fatal_sxid_goes_to_the_nvswitch_ladder(shipped_runbooks: RunbookSet) -> None:
    [fatal, non_fatal] = sxid_findings(
        "gpu-node-001", parse_sxids([FATAL_SXID, NON_FATAL_SXID]), None, AT
    )
    assert (fatal.check, fatal.reason, fatal.severity) == (
        "nvswitch",
        "SXidFatal",
        Severity.CRITICAL,
    )
    assert fatal.component.kind is ComponentKind.NVSWITCH
    assert fatal.component.describe() == "NVSwitch nvidia-nvswitch0"
    runbook = shipped_runbooks.match(fatal)
    assert runbook is not None and runbook.name == "nvswitch"
    assert [r.action for r in runbook.ladder][:2] == [Action.DRAIN, Action.REBOOT]
    rebuilt = fatal.model_copy(update={"check": FROM_CONDITION, "nvidia_action": None})
    assert routed(shipped_runbooks, rebuilt) == "nvswitch"  # by its reason alone
    assert non_fatal.reason == "SXidNonFatal" and not non_fatal.unhealthy
    assert shipped_runbooks.match(non_fatal) is None


def test_the_schema_and_the_loader_know_nvidia_actions(tmp_path: Path) -> None:
    doc = {"name": "r", "match": {"nvidia_actions": ["reset_gpu"]}}
    jsonschema.validate(doc, json_schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc, "match": {"nvidia_actions": ["reboot_gpu"]}}, json_schema())
    terms = json_schema()["$defs"]["Match"]["properties"]["nvidia_actions"]["items"]["oneOf"]
    assert {t["const"] for t in terms} == {a.value for a in XidAction}
    assert all(t["description"] for t in terms)  # what each asks for, for editors
    path = tmp_path / "typo.yaml"
    path.write_text("name: r\nmatch: {nvidia_actions: [reset_gpus]}\n")
    with pytest.raises(RunbookError, match="unknown NVIDIA action 'reset_gpus'.*'reset_gpu'"):
        load_runbooks([path])
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nmatch: {checks: [memory], nvidia_actions: [reboot]}\n")
    with pytest.raises(RunbookError, match="can never match"):
        load_runbooks([path])


def test_explain_says_which_actions_a_runbook_answers() -> None:
    clause = Match(xids=[154], nvidia_actions=[XidAction.REBOOT])
    assert describe_match(clause) == "Xid 154 with NVIDIA's action reboot"


def test_a_runbook_in_a_message_may_name_an_action_this_worker_does_not_know() -> None:
    """A newer remedy may route an action this one lacks: its reports must still decode."""
    clause = Match.model_validate({"nvidia_actions": ["reboot", "reset_imex_domain"]})
    assert clause.matches(xid_finding(154, XidAction.REBOOT))
    assert not clause.matches(xid_finding(154, XidAction.RESET_GPU))
