"""One patch marker per run for every change made before the fold, instead of one per change.

A ladder's history carried up to 18 `core_patch` markers, one per ``workflow.patched`` change
it went through, noise between the steps an operator reads. Each marker only says "this run
takes the code after change X"; a run that starts on a release with every change in ``FOLDED``
says it once, with ``FOLDED_INTO``, and asks no more (``patched``).

Safe for histories from before: every ask goes through ``patched``, the SDK keeps the answer
of a run's first ask of ``FOLDED_INTO`` for the run, and a run from before never recorded it,
so replayed on this code it answers "not folded" and asks each change as it did. Not for a
rollback: the release before, which asks each change, cannot replay a run started on this one
(docs/operations.md, "Rollout"). A change made after the fold is not in ``FOLDED`` and records
its own marker until the next fold.

Deprecation, when the histories from before the fold no longer run (no open workflow started
before the release that folded, `remedy status` and `ExecutionStatus = 'Running' AND StartTime
< '<release date>'` in the Web UI say so; keep the recorded histories of tests/histories until
then): replace each folded change's old branch by its new one, delete its constant and its
replay histories, and ``patched(X)`` becomes ``True`` — in one release, with the replay test of
the new histories green. docs/operations.md ("Retiring patches") has the steps.
"""

from __future__ import annotations

from temporalio import workflow

FOLDED_INTO = "remedy-changes-to-2026-12"
FOLDED = frozenset(
    {
        "abort-wins-worse-fault-escalates-drain-first",
        "active-check-holds-the-node-it-leaves-cordoned",
        "active-check-idle-recheck",
        "active-checks-bounded-round",
        "adopt-orphaned-cordons",
        "agent-silent-ladders",
        "ask-the-breaker-before-a-cordon",
        "breaker-holds-cordons",
        "breaker-limits-the-unschedulable-share",
        "budget-sends-without-waiting",
        "budget-signals-in-one-activity",
        "budget-sweep-backs-off",
        "budget-sweep-backs-off-while-ladders-wait",
        "budget-sweeps-on-its-own-clock",
        "cancelled-activity-is-not-a-failure",
        "change-runbooks-mid-ladder",
        "confirm-fault-before-disrupting",
        "confirm-reboot-from-boot-id",
        "cordon-first-where-the-published-breaker-is-closed",
        "diagnose-every-gpu",
        "disruption-budget-leases",
        "elastic-restarts",
        "end-when-the-node-is-gone",
        "gpu-sized-leases",
        "grant-signals-together",
        "hardware-record-incidents",
        "held-for-a-human-without-a-lease",
        "hold-nodes-left-for-a-human",
        "judge-silence-fleet-wide",
        "lease-held-for-a-human",
        "liveness-on-the-controllers-clock",
        "measure-job-goodput",
        "on-approval-timeout-choices",
        "publish-conditions-on-recovery",
        "publish-the-breaker-for-cordons",
        "re-ask-for-lease",
        "rebuild-holders-from-running-ladders",
        "rebuild-waiters-in-order",
        "regrant-to-a-new-run-of-the-holder",
        "release-gpu-operands-for-reset",
        "remedy-index-job-guards",
        "remedy-index-lease",
        "remedy-search-attributes",
        "replace-once-per-node-object",
        "restore-after-an-unanswered-cordon",
        "restore-the-mig-layout",
        "resume-above-a-recovery-that-did-not-hold",
        "return-gpus-after-a-failed-release",
        "signed-operator-decisions",
        "skip-rungs-the-node-cannot-perform",
        "stale-problem-conditions",
        "take-blocklisted-gpus-out-of-service",
        "take-blocklisted-gpus-out-of-service-in-older-records",
        "take-over-a-hold-within-the-cap",
        "tell-the-budget-a-holder-waits-for-a-person",
        "track-nodes-out-whose-share-went-back",
        "verify-the-trigger-part",
        "verify-with-what-saw-the-fault",
        "wait-for-a-cancelled-drain",
    }
)


# The second fold: the first's changes and every one since. A run that starts on a release with
# it records this one marker (and one upsert of TemporalChangeVersion, which the server writes
# to visibility too: five a ladder before); a run from the first fold on asks as it did.
FOLDED_AGAIN_INTO = "remedy-changes-to-2026-12-02"
FOLDED_AGAIN = FOLDED | frozenset(
    {
        "first-steps-in-the-first-workflow-task",
        "lease-asked-and-given-back-by-local-activities",
        "lease-granted-in-the-answer-to-its-request",
        "one-upsert-per-turn-of-the-workflow",
    }
)


# The third fold: the second's changes and every one since, so that the keyring's later load
# (``keyring-loaded-when-first-needed``, asked by every new ladder) adds no marker of its own.
FOLDED_THRICE_INTO = "remedy-changes-to-2026-12-03"
FOLDED_THRICE = FOLDED_AGAIN | frozenset(
    {
        "a-grant-is-for-the-run-that-asked",
        "budget-continues-as-new-when-quiet",
        "keyring-loaded-when-first-needed",
        "signal-a-grant-to-a-holder-that-asked-by-signal-too",
    }
)


# The fourth fold: the third's changes and the door's (workflows/door.py), asked by every new
# ladder in its first activation, so that the door adds no marker (nor its visibility upsert)
# to every ladder of a storm.
FOLDED_FOUR_INTO = "remedy-changes-to-2026-12-07"
FOLDED_FOUR = FOLDED_THRICE | frozenset(
    {
        "record-an-action-that-finished-after-a-stop",
        "trust-nothing-at-the-door",
    }
)


def patched(change: str) -> bool:
    """Release 0.12.0, the one that deprecates every change (the SDK's path: patched, then
    deprecate_patch, then removed): each change is taken, as every run started on 0.1.0 took
    it, and the marker 0.1.0 recorded for it (the newest fold's for a folded change, else the
    change's own) is deprecated where 0.1.0 asked it. So 0.12.0 replays the runs 0.1.0 started,
    and the runs it starts record deprecated markers, which 0.13.0, asking none, replays
    (docs/operations.md, "Upgrading")."""
    workflow.deprecate_patch(FOLDED_FOUR_INTO if change in FOLDED_FOUR else change)
    return True
