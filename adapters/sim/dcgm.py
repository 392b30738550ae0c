"""DCGM's health watches on a simulated node: ``dcgmi health -c -j`` as dcgmi prints it
(tests/data/dcgm/README.md), from the node's faults, with DCGM's own messages
(``dcgmlib/dcgm_errors.h``), so `remedy probe --simulate` and the tests see the dcgm_health
check without a GPU. A node without DCGM (``SimNode.dcgm_health`` off) is not asked."""

from __future__ import annotations

import json
from typing import Any

from adapters.sim.faults import Effect

# What DCGM's health watches say of a fault the twin plays: (system, result, message).
_INCIDENTS: dict[Effect, tuple[str, str, str]] = {
    Effect.ECC: (
        "Memory system",
        "Failure",
        "Detected 1 volatile double-bit ECC error(s) in GPU {}.",
    ),
    Effect.REMAP_FAILURE: (
        "Memory system",
        "Failure",
        "GPU {} had uncorrectable memory errors and row remapping failed.",
    ),
    Effect.THROTTLE: (
        "Thermal system",
        "Warning",
        "Detected clocks event due to thermal violation in GPU {}.",
    ),
    Effect.NVLINK_CRC: (
        "NVLINK system",
        "Failure",
        "250.0 CRC FLIT NvLink errors found occuring per second on GPU {}, exceeding the limit "
        "of 100 per second.",
    ),
}


def health_report(effects: dict[int, set[Effect]]) -> str:
    """The report for the effects on each GPU (index → effects)."""
    gpus: dict[str, Any] = {}
    worst = "Healthy"
    for gpu, found in sorted(effects.items()):
        errors = {
            system: {"value": result, "overflow": [message.format(gpu)]}
            for effect in sorted(found)
            if effect in _INCIDENTS
            for system, result, message in [_INCIDENTS[effect]]
        }
        if not errors:
            continue
        health = "Failure" if any(e["value"] == "Failure" for e in errors.values()) else "Warning"
        worst = health if worst != "Failure" else worst
        gpus[str(gpu)] = {"value": health, "children": {"Errors": {"children": errors}}}
    body: dict[str, Any] = {"Overall Health": {"value": worst}}
    if gpus:
        body["GPU"] = {"children": gpus}
    return json.dumps({"body": body, "header": ["Health Monitor Report"]}, indent=3, sort_keys=True)
