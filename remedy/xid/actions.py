"""NVIDIA's immediate actions for an Xid, in remedy's words, and what each one costs the node.

NVIDIA's Xid catalog names an immediate "resolution bucket" per code (RESTART_APP, IGNORE,
RESET_GPU, RESTART_BM, …); some buckets are workflows whose answer is in the message (Xid 154
names the recovery the driver needs, 74 and 144–150 carry register payloads, 45 says whether
another Xid caused it). The catalog and the decoders resolve every Xid to one of these.
"""

from __future__ import annotations

from enum import StrEnum

from remedy.core.models import Severity


class XidAction(StrEnum):
    IGNORE = "ignore"  # IGNORE: no action required; recorded, never a remediation
    RESTART_APP = "restart_app"  # RESTART_APP: the job's problem; never costs the node
    RESET_GPU = "reset_gpu"  # RESET_GPU, and DRAIN_AND_RESET (a drain comes first anyway)
    REBOOT = "reboot"  # RESTART_BM: restart the bare-metal node
    RESTART_VM = "restart_vm"  # RESTART_VM: on Kubernetes the VM is the node, so a reboot
    RESTART_FABRIC_MANAGER = "restart_fabric_manager"  # Xid 45 on its own (WORKFLOW_XID_45)
    CONTACT_SUPPORT = "contact_support"  # CONTACT_SUPPORT; also where a decode is unknown
    CHECK_MECHANICALS = "check_mechanicals"  # CHECK_MECHANICALS: seating, cables, power
    UPDATE_SOFTWARE = "update_software"  # UPDATE_SWFW: driver or firmware


# How much each action matters: ignore is informational (no ladder), an application's error is
# a warning (the job guard's evidence; the node keeps running), everything else needs the node.
SEVERITY: dict[XidAction, Severity] = {
    XidAction.IGNORE: Severity.INFO,
    XidAction.RESTART_APP: Severity.WARNING,
    XidAction.RESTART_FABRIC_MANAGER: Severity.WARNING,
    XidAction.RESET_GPU: Severity.CRITICAL,
    XidAction.REBOOT: Severity.CRITICAL,
    XidAction.RESTART_VM: Severity.CRITICAL,
    XidAction.CONTACT_SUPPORT: Severity.CRITICAL,
    XidAction.CHECK_MECHANICALS: Severity.CRITICAL,
    XidAction.UPDATE_SOFTWARE: Severity.CRITICAL,
}
