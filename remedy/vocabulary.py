"""Every check name and finding reason remedy produces: what a runbook's ``match`` may name.

A runbook with ``checks: [memroy]`` would load and never match, and the fault it was written
for would go unhandled; so `remedy runbooks validate` checks names against this registry and
`remedy runbooks schema` lists them for editors. The entries come from where findings are
made: the probe's checks (``remedy/probe``), the deep diagnose, admission, the job guard, a
manual trigger, and the Xid catalog (``Xid<code>``, any code: an uncatalogued Xid is still
reported under its number). A test keeps the code that makes findings and this table in step.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from remedy.xid.actions import XidAction
from remedy.xid.catalog import load_catalog

XID_REASON = re.compile(r"^Xid[0-9]{1,4}$")
XID_CHECK = "xid"
NVSWITCH_CHECK = "nvswitch"


@dataclass(frozen=True)
class CheckTerms:
    check: str
    says: str
    reasons: Mapping[str, str]  # reason → what it means
    probe: bool = False  # a re-probe sees the fault while it lasts (an Xid is an event: no)
    # Its faults often pass by themselves, in minutes: `remedy runbooks validate` warns about a
    # runbook that disrupts for one at once, with no approval (remedy/runbook/lint.py).
    transient: bool = False


TERMS: tuple[CheckTerms, ...] = (
    CheckTerms(
        "inventory",
        "the GPUs NVML sees against those the node should have",
        {
            "GpuFallenOffBus": "NVML reports a GPU as lost",
            "GpuMissing": "fewer GPUs than the node should have",
        },
        probe=True,
    ),
    CheckTerms(
        "memory",
        "ECC errors, row remapping and the driver's recovery action",
        {
            "EccUncorrectable": "uncorrectable ECC errors since the last reset",
            "RowRemapFailure": "row remapping failed: no spare rows left",
            "RowRemapPending": "a row remap waits for a reset",
            "RetiredPagesPending": "retired pages wait for a reset (before Ampere)",
            "RecoveryActionGpuReset": "the driver asks for a GPU reset",
            "RecoveryActionNodeReboot": "the driver asks for a node reboot",
            "RecoveryActionDrainP2P": "the driver asks to drain peer-to-peer traffic",
            "RecoveryActionDrainAndReset": "the driver asks for a drain and a GPU reset",
            "RecoveryActionSystemReboot": "the driver asks for a system reboot",
        },
        probe=True,
    ),
    CheckTerms(
        "thermal",
        "clock slowdowns and temperature",
        {
            "HwThermalSlowdown": "hardware thermal slowdown",
            "HwPowerBrakeSlowdown": "hardware power-brake slowdown",
            "HwSlowdown": "hardware slowdown",
            "GpuOverTemperature": "the GPU is over its temperature limit",
        },
        probe=True,
        # A slowdown follows load, airflow and power: the probe reports every one as a warning,
        # the fleet twin's thermal fault passes in two minutes, and the shipped runbook
        # tolerates ten before it drains.
        transient=True,
    ),
    CheckTerms(
        "pcie",
        "the GPU's PCIe link",
        {"PcieWidthDegraded": "the link runs narrower than it can"},
        probe=True,
    ),
    CheckTerms(
        "nvlink",
        "NVLink links and the NVSwitch fabric",
        {
            "NvLinkDown": "NVLink links are down",
            "FabricNotReady": "the GPU has not joined the NVSwitch fabric",
        },
        probe=True,
    ),
    CheckTerms(
        "nic",
        "RDMA NICs: count, port state and rate",
        {
            "NicMissing": "fewer RDMA devices than the node should have",
            "NicPortDown": "an RDMA port is not ACTIVE",
            "NicRateDegraded": "an RDMA port runs below its expected rate",
        },
        probe=True,
    ),
    CheckTerms(
        "kernel_log",
        "the kernel log read for Xids on every probe (kmsg, the journal or a file)",
        {"KernelLogUnreadable": "the kernel log cannot be read: Xids there go unseen"},
        probe=True,
    ),
    CheckTerms(
        "probe",
        "the probe itself (fail closed: a check that could not run is a finding)",
        {
            "NvmlUnavailable": "NVML cannot be loaded or initialised",
            "CheckTimedOut": "a check did not answer in time",
            "CheckFailed": "a check raised an error",
            "ProbeUnavailable": "the probe could not run on the node (its agent is down)",
        },
        probe=True,
    ),
    CheckTerms(
        "load",
        "the deep diagnose's load test (DCGM diagnostics, or torch/cupy)",
        {
            "FailsUnderLoad": "a GPU raised an error under sustained load",
            "MemoryMismatch": "GPU memory read back differs from the pattern written",
            "SlowGpu": "a GPU runs below the reference throughput for its model",
            "SlowRank": "a GPU runs much slower than its peers on the node",
            "DcgmDiagFailed": "a DCGM diagnostic test failed",
            "DcgmDiagWarning": "a DCGM diagnostic test warned",
            "DiagnoseCouldNotRun": "the load test could not run on the node or a GPU (fail closed)",
            "NoThroughputReference": "no reference for the GPU model: peers compared only",
        },
    ),
    CheckTerms(
        "admission",
        "a new node's validation",
        {"AdmissionFailed": "the node failed admission"},
    ),
    CheckTerms(
        "job",
        "a guarded job's failure blamed on the node",
        {"JobPlatformFailure": "a job failed on this node for a platform reason"},
    ),
    CheckTerms(
        "scan",
        "the fleet scan",
        {
            "OrphanedCordon": "remedy's cordon on a node no ladder owns (its ladder failed)",
            "AgentSilent": "the node's agent stopped heartbeating (its conditions went stale)",
        },
    ),
    CheckTerms(
        "hardware",
        "the hardware record of each GPU serial",
        {"Blocklisted": "a GPU in service crossed the blocklist threshold"},
    ),
    CheckTerms(
        "manual",
        "`remedy trigger`",
        {"ManualTrigger": "an operator started the remediation by hand"},
    ),
    CheckTerms(XID_CHECK, "Xid errors from NVML events or the kernel log", {}),
    CheckTerms(
        NVSWITCH_CHECK,
        "NVSwitch errors (SXid) in the kernel log",
        {
            "SXidFatal": "a fatal NVSwitch error: the fabric needs a reset",
            "SXidNonFatal": "a non-fatal NVSwitch error (recorded)",
            "SXidCorrectable": "a corrected NVSwitch error (recorded)",
            "SXidUnknown": "an SXid line that says neither fatal nor non-fatal: a person reads it",
        },
    ),
)


# NVIDIA's immediate actions for an Xid (remedy/xid/actions.py), as a runbook's
# ``nvidia_actions`` names them, with what each asks for.
NVIDIA_ACTIONS: Mapping[str, str] = {
    XidAction.IGNORE.value: "nothing to do: informational, never a remediation",
    XidAction.RESTART_APP.value: "restart the application: the job's error, not the node's",
    XidAction.RESET_GPU.value: "reset the GPU",
    XidAction.REBOOT.value: "restart the bare-metal node",
    XidAction.RESTART_VM.value: "restart the VM (on Kubernetes, the node)",
    XidAction.RESTART_FABRIC_MANAGER.value: "restart NVIDIA Fabric Manager (Xid 45 on its own)",
    XidAction.CONTACT_SUPPORT.value: "a person looks (also where the message cannot be decoded)",
    XidAction.CHECK_MECHANICALS.value: "check seating, cables and power",
    XidAction.UPDATE_SOFTWARE.value: "update the driver or firmware",
}


class UnknownTerm(ValueError):
    pass


@cache
def checks() -> dict[str, CheckTerms]:
    return {t.check: t for t in TERMS}


@cache
def reasons() -> dict[str, str]:
    """Every known reason with what it means; Xid reasons from the catalog."""
    known = {r: says for t in TERMS for r, says in t.reasons.items()}
    catalog = load_catalog()
    for code in catalog.codes():
        known[f"Xid{code}"] = f"Xid {code}: {catalog.lookup(code).description}"
    return known


def check_of(reason: str) -> str | None:
    """The check that reports ``reason`` (None: unknown)."""
    if XID_REASON.match(reason):
        return XID_CHECK
    return next((t.check for t in TERMS if reason in t.reasons), None)


def seen_by_probe(check: str, reason: str) -> bool:
    """Whether a re-probe sees this fault while it lasts. A finding rebuilt from a node
    condition keeps only its reason: the check is the one that reports the reason."""
    terms = checks().get(check) or checks().get(check_of(reason) or "")
    return terms is not None and terms.probe


def known_check(name: str) -> str:
    if name not in checks():
        known = "; known: " + ", ".join(sorted(checks()))
        raise UnknownTerm(f"unknown check {name!r}{_did_you_mean(name, checks(), known)}")
    return name


def known_reason(name: str) -> str:
    if check_of(name) is None:
        listed = " (`remedy runbooks schema` lists them; an Xid is Xid<code>)"
        raise UnknownTerm(f"unknown reason {name!r}{_did_you_mean(name, reasons(), listed)}")
    return name


def known_nvidia_action(name: str) -> str:
    if name not in NVIDIA_ACTIONS:
        listed = "; known: " + ", ".join(NVIDIA_ACTIONS)
        raise UnknownTerm(
            f"unknown NVIDIA action {name!r}{_did_you_mean(name, NVIDIA_ACTIONS, listed)}"
        )
    return name


def _did_you_mean(name: str, known: Mapping[str, object], otherwise: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else otherwise
