"""The live ``workflow.patched`` ids, each with the release that removes it.

Since 0.13.0 a change to a workflow ships in a new Worker Deployment Version (workers/
versioning.py). A ladder and the other finite per-node workflows are PINNED: a run finishes on
the code it started on, so a change to them needs no patch. Only the perpetual workflows (the
pools' budgets, hardware records, job guards, fleet scans), which AUTO_UPGRADE to the current
version, ask ``patched`` for a change that alters the commands a running one replays; such a
patch goes the SDK's way, one release a step (docs/operations.md, "Upgrading"):

1. release N asks ``patched(X)``, both branches kept; X enters ``LIVE`` with its removal
   release, N+2;
2. release N+1 keeps the new branch only and calls ``workflow.deprecate_patch(X)`` where N
   asked: it replays the runs N started, and the runs it starts record a deprecated marker;
3. release N+2 drops the call: a deprecated marker that no code asks for replays.

Upgrades are supported from the release before only, so N+1 replays N's histories and N+2
replays N+1's (tests/test_replay.py). Skipping step 2 is not possible: replaying a history
whose marker is not deprecated, on code that no longer asks for it, fails ("Non-deprecated
patch marker encountered for change X, but there is no corresponding change command").
Release 0.12.0 was that step for every patch of the releases before (their folds included):
0.13.0 asks none.

At most ``MOST_LIVE`` ids live at once (tests/test_replay.py checks).
"""

from __future__ import annotations

from temporalio import workflow

MOST_LIVE = 10
# A ladder's first task ends before its first rung (workflows.operator_keys ``heard``): added
# on 0.13.0's build id, whose running ladders replay it (tests/test_replay.py).
HEARD_BEFORE_FIRST_RUNG = "heard-before-first-rung"
# A ladder held by the breaker ends on a clean re-probe only when the probe can see its fault
# (workflows.quarantine_gate): added on 0.13.0's build id too.
REPROBE_SEES_THE_FAULT = "reprobe-sees-the-fault"
# id -> the release that removes it (its deprecation is the release before).
LIVE: dict[str, str] = {HEARD_BEFORE_FIRST_RUNG: "0.15.0", REPROBE_SEES_THE_FAULT: "0.15.0"}


def patched(change: str) -> bool:
    """``workflow.patched(change)`` for a change listed in ``LIVE`` (a KeyError otherwise: a
    patch has its removal release written down before it ships)."""
    if change not in LIVE:
        raise KeyError(f"patch {change!r} is not in contract.patches.LIVE with its removal release")
    return workflow.patched(change)
