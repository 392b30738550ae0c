"""The probe's DCGM health check: DCGM's background health watches, read with
``dcgmi health -c -j`` where the agent is asked to (``--dcgm-health``), with its terms and its
seam (``adapters.host.dcgm_health`` runs dcgmi; the simulation answers for its nodes).

DCGM samples PCIe, memory, InfoROM, thermal, power, NVLink and driver fields in the background
(watches set with ``dcgmi health -s a``) and a check turns what it kept into incidents, each on
an entity (a GPU, an NVSwitch, a ConnectX) and a system, each a Warning or a Failure. The JSON
is dcgmi's generic output tree (NVIDIA/DCGM ``dcgmi/Health.cpp``, ``dcgmi/DcgmiOutput.h``)::

    {"header": ["Health Monitor Report"],
     "body": {"Overall Health": {"value": "Failure"},
              "GPU": {"children": {"1": {"value": "Failure", "children": {"Errors":
                  {"children": {"Memory system": {"value": "Failure",
                                                  "overflow": ["Detected 2 volatile ..."]}}}}}}}}}

A message longer than 54 characters is cut into several ``overflow`` strings; two incidents of
one system on one entity are joined with ", ". Fail closed: an answer with no "Overall Health",
or an overall verdict other than Healthy with no incident under it, is unreadable, never
healthy; "no watches set" (dcgmi: "Health watches not enabled") is said, not taken as healthy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.probe.context import NODE, CheckContext
from remedy.detection.probe.dcgm_sources import HealthUnreadable, NotWatched

DCGM_HEALTH = CheckTerms(
    "dcgm_health",
    "DCGM's background health watches (`dcgmi health -c -j`), where the agent is asked to read "
    "them",
    probe=True,
)
# One reason per DCGM health system (dcgmi names it "<X> system"), so runbooks can send each
# to the runbook of the same fault the probe's own checks find.
_SYSTEMS = {
    "PCIe system": DCGM_HEALTH.reason("DcgmHealthPcie", "DCGM: PCIe replays or link errors"),
    "Memory system": DCGM_HEALTH.reason(
        "DcgmHealthMemory", "DCGM: ECC errors, retired pages or row remapping"
    ),
    "InfoROM system": DCGM_HEALTH.reason("DcgmHealthInforom", "DCGM: a corrupt InfoROM"),
    "Thermal system": DCGM_HEALTH.reason("DcgmHealthThermal", "DCGM: thermal violations"),
    "Power system": DCGM_HEALTH.reason(
        "DcgmHealthPower", "DCGM: power violations, or power that cannot be read"
    ),
    "NVLINK system": DCGM_HEALTH.reason("DcgmHealthNvlink", "DCGM: NVLink errors or a link down"),
    "Driver": DCGM_HEALTH.reason("DcgmHealthDriver", "DCGM: the driver (a GPU off the bus, ...)"),
    "ConnectX system": DCGM_HEALTH.reason("DcgmHealthConnectx", "DCGM: a ConnectX NIC's errors"),
}
OTHER = DCGM_HEALTH.reason("DcgmHealthOther", "DCGM: an incident in another system (SM, ...)")
NVSWITCH_FATAL = DCGM_HEALTH.reason(
    "DcgmHealthNvSwitchFatal", "DCGM: fatal errors on an NVSwitch link (as a fatal SXid)"
)
NVSWITCH_NONFATAL = DCGM_HEALTH.reason(
    "DcgmHealthNvSwitchNonFatal", "DCGM: non-fatal errors on an NVSwitch link (recorded)"
)
XID = DCGM_HEALTH.reason(
    "DcgmHealthXid", "DCGM saw an Xid (recorded: the kernel log and NVML's events route Xids)"
)
# DCGM's health watches turn Xids into incidents of a system: Xid 31 (an application's MMU
# fault) is a Memory incident, 79 "has fallen off the bus" (modules/health/DcgmHealthWatch.cpp,
# BuildXidMappings). Routed by system, an application's fault would reset a GPU; remedy's Xid
# readers see the same Xid with its line, which decides its action: recorded here.
# One system's incidents are joined with ", ": only an incident that is all Xids is recorded.
_XID_WORDS = re.compile(
    r"Detected XID \d+ for GPU \d+|GPU -?\d+ has fallen off the bus"
    r"|GPU had an? (?:un)?contained error \(XID \d+\)"
)
# The driver's recovery action, which the memory check reads from NVML and routes by value
# (dcgm_errors.h: "GPU 2 fault may have left the OS in an inconsistent state. Recovery action:
# 2 (NODE_REBOOT).").
_RECOVERY = re.compile(r"GPU \d+ [^,]*?\. Recovery action: -?\d+ \([A-Z_]+\)\.")
_NVSWITCH_NONFATAL = re.compile(r"Detected nonfatal errors on NvSwitch \d+ link \d+")
UNREADABLE = DCGM_HEALTH.reason(
    "DcgmHealthUnreadable", "dcgmi health could not be run or read (fail closed)"
)
NOT_WATCHED = DCGM_HEALTH.reason(
    "DcgmHealthNotWatched", "DCGM has no health watches set: nothing is watched"
)
_SEVERITY = {"warning": Severity.WARNING, "failure": Severity.CRITICAL}
OVERALL = "Overall Health"


@dataclass(frozen=True)
class Incident:
    group: str  # dcgmi's entity group: GPU, Switch, ConnectX, GPU_I, ...
    entity: str  # its id within the group (a GPU's DCGM id: NVML's index)
    system: str  # "Memory system", "PCIe system", ..., "Driver"
    health: str  # Warning, Failure
    message: str


def parse_health(text: str) -> list[Incident]:
    """The incidents in one ``dcgmi health -c -j`` answer (none: Healthy)."""
    try:
        doc = json.loads(text[text.find("{") :]) if "{" in text else None
    except ValueError:
        doc = None
    body = doc.get("body") if isinstance(doc, dict) else None
    overall = _value(body.get(OVERALL)) if isinstance(body, dict) else ""
    if not isinstance(body, dict) or not overall:
        raise HealthUnreadable(f"dcgmi health printed no {OVERALL!r}: {_clip(text)}")
    incidents = [
        Incident(group, entity, system, _value(node), _message(node))
        for group, entities in body.items()
        if group != OVERALL
        for entity, errors in _children(entities).items()
        for system, node in _children(_children(errors).get("Errors")).items()
    ]
    if overall.lower() != "healthy" and not incidents:
        raise HealthUnreadable(f"dcgmi health says {overall!r} and names no incident")
    return incidents


def check_dcgm_health(ctx: CheckContext) -> list[Finding]:
    assert ctx.dcgm_health is not None
    try:
        incidents = parse_health(ctx.dcgm_health.check())
    except NotWatched as exc:
        return [ctx.finding(DCGM_HEALTH.check, NOT_WATCHED, Severity.WARNING, str(exc))]
    except HealthUnreadable as exc:
        return [ctx.finding(DCGM_HEALTH.check, UNREADABLE, Severity.WARNING, str(exc))]
    return [_finding(ctx, incident) for incident in incidents]


def classify(incident: Incident) -> tuple[str, Severity]:
    """The reason and severity of one incident: by its system, and DCGM's Warning or Failure
    (an "Internal error" result is not a pass: the worst); what remedy's own readers route
    better (an Xid, the driver's recovery action, a non-fatal NVSwitch error, as a non-fatal
    SXid) is recorded, informational."""
    severity = _SEVERITY.get(incident.health.lower(), Severity.CRITICAL)
    if _only(_XID_WORDS, incident.message):
        return XID, Severity.INFO
    if incident.group == "Switch":  # dcgmi names no system for the NVSwitch watches
        if _only(_NVSWITCH_NONFATAL, incident.message):
            return NVSWITCH_NONFATAL, Severity.INFO
        return NVSWITCH_FATAL, severity
    if incident.system == "Driver" and _only(_RECOVERY, incident.message):
        return _SYSTEMS["Driver"], Severity.INFO
    return _SYSTEMS.get(incident.system, OTHER), severity


def _only(pattern: re.Pattern[str], message: str) -> bool:
    """Every incident in ``message`` (one system's, joined with ", ") is one ``pattern`` says."""
    return bool(pattern.search(message)) and not pattern.sub("", message).strip(" ,.")


def _finding(ctx: CheckContext, incident: Incident) -> Finding:
    reason, severity = classify(incident)
    where = f"{incident.group} {incident.entity}"
    return ctx.finding(
        DCGM_HEALTH.check,
        reason,
        severity,
        f"DCGM health {incident.system} {incident.health} on {where}: {incident.message}",
        _component(ctx, incident),
    )


def _component(ctx: CheckContext, incident: Incident) -> Component:
    if incident.group != "GPU" or not incident.entity.isdigit():
        return NODE  # an NVSwitch, a NIC, a MIG instance: the evidence names it
    index = int(incident.entity)
    known = next((g for g in ctx.gpus if g.index == index), None)
    return known or Component(kind=ComponentKind.GPU, index=index)


def _children(node: Any) -> dict[str, Any]:
    kids = node.get("children") if isinstance(node, dict) else None
    return kids if isinstance(kids, dict) else {}


def _value(node: Any) -> str:
    return str(node.get("value", "")).strip() if isinstance(node, dict) else ""


def _message(node: Any) -> str:
    parts = node.get("overflow") if isinstance(node, dict) else None
    return " ".join(str(p).strip() for p in parts) if isinstance(parts, list) else ""


def _clip(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return (flat[:limit] + "…") if len(flat) > limit else flat or "(nothing)"
