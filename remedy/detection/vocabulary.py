"""Every check name and finding reason remedy produces: what a runbook's ``match`` may name.

A runbook with ``checks: [memroy]`` would load and never match, and the fault it was written
for would go unhandled; so `remedy runbooks validate` checks names against this registry and
`remedy runbooks schema` lists them for editors. The entries come from where findings are
made. A probe check declares its name and reasons once, beside its code (``CheckTerms``,
remedy/detection/check_terms.py: the GPU checks, the NIC check, the probe runner, the load test, the
NVSwitch lines), and they are gathered here; the terms of findings made elsewhere (admission,
the job guard, the fleet scan, the hardware record, a manual trigger) are declared here, and
Xids come from the catalog (``Xid<code>``, any code: an uncatalogued Xid is still reported
under its number). A test keeps the code that makes findings and this table in step.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import cache

from remedy.detection.check_terms import CheckTerms
from remedy.detection.fabric.verdict import FABRIC
from remedy.detection.probe import checks as probe_checks
from remedy.detection.probe.dcgm_health import DCGM_HEALTH
from remedy.detection.probe.exporter_xids import DCGM_EXPORTER
from remedy.detection.probe.load import LOAD
from remedy.detection.probe.nic_check import NIC
from remedy.detection.probe.nic_link import NIC_LINK
from remedy.detection.probe.nic_log import NIC_DRIVER
from remedy.detection.probe.runner import KERNEL_LOG, PROBE
from remedy.detection.probe.sxids import NVSWITCH
from remedy.detection.stragglers.models import STRAGGLERS
from remedy.xid.actions import XidAction
from remedy.xid.catalog import load_catalog

XID_REASON = re.compile(r"^Xid[0-9]{1,4}$")
XID_CHECK = "xid"
NVSWITCH_CHECK = NVSWITCH.check


TERMS: tuple[CheckTerms, ...] = (
    *probe_checks.TERMS,
    NIC,
    NIC_LINK,
    NIC_DRIVER,
    DCGM_HEALTH,
    DCGM_EXPORTER,
    KERNEL_LOG,
    PROBE,
    LOAD,
    FABRIC,
    # Findings made outside the probe (admission, the job guard, the fleet scan, ...).
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
    NVSWITCH,
    STRAGGLERS,  # the job guard's straggler detector (remedy/detection/stragglers/)
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


def terms_markdown() -> str:
    """Every check with what it looks at and its reasons, as docs/runbooks.md shows them
    (tests/generated_docs.py writes it there)."""
    rows = ["| check | what it looks at | reasons |", "|---|---|---|"]
    for t in TERMS:
        reasons = "; ".join(f"`{r}`: {says}" for r, says in t.reasons.items())
        rows.append(f"| `{t.check}` | {t.says} | {reasons or '`Xid<code>`, any code'} |")
    return "\n".join(rows)


class UnknownTerm(ValueError):
    """A check or reason no check declares: a typo in a runbook, never a match."""


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
