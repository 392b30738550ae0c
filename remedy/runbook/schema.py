"""The runbook schema. A runbook says what it matches, how long to tolerate, and the ladder."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError

from remedy.core.actions import ACTIONS, GPU_SCOPED
from remedy.core.durations import Duration, format_duration
from remedy.core.models import Action, Finding, Scope, Severity
from remedy.detection import vocabulary
from remedy.runbook.approval_rule import approval_fits
from remedy.runbook.authored import (
    Approval,
    Authored,
    Cause,
    IfDrainFailed,
    OnApprovalTimeout,
    RetryPolicy,
    _authoring,
)
from remedy.runbook.terms import Terms
from remedy.runbook.undrained import IfNotDrained, node_level_only


def _check_name(name: str, info: ValidationInfo) -> str:
    return vocabulary.known_check(name) if _authoring(info) else name


def _reason_name(name: str, info: ValidationInfo) -> str:
    return vocabulary.known_reason(name) if _authoring(info) else name


def _nvidia_action(name: str, info: ValidationInfo) -> str:
    return vocabulary.known_nvidia_action(name) if _authoring(info) else name


CheckName = Annotated[str, AfterValidator(_check_name), Terms("check")]
ReasonName = Annotated[str, AfterValidator(_reason_name), Terms("reason")]
# An XidAction value; a str so that a runbook in a message from a newer remedy, naming an
# action this one does not know, still decodes (the clause then matches nothing here).
NvidiaAction = Annotated[str, AfterValidator(_nvidia_action), Terms("nvidia_action")]


_DRAINED = ", ".join(a.value for a, spec in ACTIONS.items() if spec.needs_drained)


class Rung(Authored):
    action: Action
    timeout: Duration = timedelta(minutes=10)
    retry: RetryPolicy = RetryPolicy()
    settle: Duration = timedelta(0)  # wait after the action before verifying
    # Re-probe after the rung and stop climbing if healthy. Default: the action's (its table in
    # remedy.core.actions): yes for those that can fix a fault, no for cordon, drain and replace.
    verify: bool | None = None
    approval: Approval = Approval.NONE
    # Only for actions that need a drained node; the drain is retried once before it applies.
    if_drain_failed: IfDrainFailed = IfDrainFailed.ASK
    # Declared after what they are checked against (a field's validator sees those before it).
    on_approval_timeout: OnApprovalTimeout = OnApprovalTimeout.NEEDS_HUMAN
    approval_timeout: Duration = timedelta(hours=4)
    # gpu: the faulty GPU only (remedy/acting/gpu_scope.py); drain, kill_job and reset_gpu.
    scope: Scope = Scope.NODE
    if_not_drained: IfNotDrained = IfNotDrained.DRAIN  # after the scope it is checked against

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Rung:
        if not ACTIONS[self.action].rung:
            raise ValueError(f"{self.action.value} is not a rung: {ACTIONS[self.action].does}")
        if self.timeout <= timedelta(0):
            raise ValueError("timeout must be longer than 0s")
        written = _authoring(info) and "if_drain_failed" in self.model_fields_set
        if written and not ACTIONS[self.action].needs_drained:
            raise ValueError(f"if_drain_failed is for the actions that need a drain ({_DRAINED})")
        return self

    @field_validator("approval")
    @classmethod
    def _needs_one(cls, value: Approval, info: ValidationInfo) -> Approval:
        approval_fits(value is Approval.REQUIRED, info.data, _authoring(info))
        return value

    @field_validator("on_approval_timeout")
    @classmethod
    def _asked_for(cls, value: OnApprovalTimeout, info: ValidationInfo) -> OnApprovalTimeout:
        """Written where no approval is ever asked for, it would do nothing."""
        data = info.data
        action = data.get("action")
        asks = data.get("approval") is Approval.REQUIRED or (
            action is not None
            and ACTIONS[action].needs_drained
            and data.get("if_drain_failed") is IfDrainFailed.ASK
        )
        if _authoring(info) and not asks:
            raise ValueError(
                "on_approval_timeout is for a rung that asks for an approval (approval: "
                f"required, or {_DRAINED} with if_drain_failed: ask)"
            )
        return value

    @field_validator("scope")
    @classmethod
    def _scoped(cls, value: Scope, info: ValidationInfo) -> Scope:
        action = info.data.get("action")
        if value is Scope.GPU and action is not None and action not in GPU_SCOPED:
            allowed = ", ".join(a.value for a in GPU_SCOPED)
            raise ValueError(f"scope: gpu is for {allowed}; {action.value} acts on the whole node")
        return value

    @field_validator("if_not_drained")
    @classmethod
    def _node_level(cls, value: IfNotDrained, info: ValidationInfo) -> IfNotDrained:
        return node_level_only(value, info.data, _authoring(info))

    @field_validator("approval_timeout")
    @classmethod
    def _has_a_deadline(cls, value: timedelta, info: ValidationInfo) -> timedelta:
        if _authoring(info) and info.data.get("on_approval_timeout") is OnApprovalTimeout.WAIT:
            raise ValueError(
                "on_approval_timeout: wait has no deadline: drop approval_timeout, or choose "
                "needs_human, release or skip"
            )
        return value

    @property
    def verifies(self) -> bool:
        if self.verify is not None:
            return self.verify
        return ACTIONS[self.action].verifies


# The checks whose findings carry NVIDIA's action (Finding.nvidia_action).
ACTION_CHECKS = frozenset({vocabulary.XID_CHECK, vocabulary.NVSWITCH_CHECK})
FROM_CONDITION = "condition"  # the check of a finding the fleet scan rebuilt from a condition


class Match(Authored):
    """A finding matches when every non-empty list contains its value."""

    checks: list[CheckName] = []
    xids: list[int] = []
    reasons: list[ReasonName] = []
    severities: list[Severity] = []
    # NVIDIA's immediate action for an Xid (Finding.nvidia_action): routes a whole class of
    # codes, e.g. every restart_app Xid, instead of listing them.
    nvidia_actions: list[NvidiaAction] = []

    def matches(self, finding: Finding) -> bool:
        if finding.check == FROM_CONDITION:
            # Rebuilt from a node condition, which keeps the reason (and Xid) but not the
            # check: the check is the one that reports the reason (a NicPortDown is the nic
            # check's), so a runbook for a check takes it; an unknown reason matches no check.
            check = vocabulary.check_of(finding.reason)
            if self.checks and check not in self.checks:
                return False
            named = self.reasons or self.xids or self.nvidia_actions or self.checks
            return bool(named) and self._matches_beyond_check(finding)
        return (not self.checks or finding.check in self.checks) and self._matches_beyond_check(
            finding
        )

    def _matches_beyond_check(self, finding: Finding) -> bool:
        return (
            (not self.xids or finding.xid in self.xids)
            and (not self.reasons or finding.reason in self.reasons)
            and (not self.severities or finding.severity in self.severities)
            and (not self.nvidia_actions or finding.nvidia_action in self.nvidia_actions)
        )

    @property
    def specificity(self) -> int:
        # Narrower criteria win: an Xid code says more than a check name; an action class
        # says as much as a reason (Xid 154 asking for a reboot: 8 + 4).
        return (
            8 * bool(self.xids)
            + 4 * bool(self.reasons)
            + 4 * bool(self.nvidia_actions)
            + 2 * bool(self.checks)
            + bool(self.severities)
        )

    @model_validator(mode="after")
    def _not_empty(self, info: ValidationInfo) -> Match:
        if not (self.checks or self.xids or self.reasons or self.severities or self.nvidia_actions):
            raise ValueError(
                "match needs at least one of checks, xids, reasons, severities, nvidia_actions"
            )
        if _authoring(info) and self.checks:
            # Both must hold: a reason no listed check reports makes the clause a silent no-op.
            stray = [r for r in self.reasons if vocabulary.check_of(r) not in self.checks]
            if stray:
                raise ValueError(
                    f"reasons {stray} are not reported by checks {self.checks} "
                    f"(but by {sorted({str(vocabulary.check_of(r)) for r in stray})}): "
                    "this clause can never match"
                )
            if self.nvidia_actions and not set(self.checks) & ACTION_CHECKS:
                raise ValueError(
                    f"nvidia_actions come with Xid and SXid findings, which checks "
                    f"{self.checks} do not report: this clause can never match"
                )
        return self


def _as_list(value: object) -> object:
    return [value] if isinstance(value, dict | Match) else value


class Runbook(Authored):
    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = ""
    # One clause or a list of clauses; the runbook matches when any clause does.
    match: Annotated[
        list[Match],
        BeforeValidator(_as_list, json_schema_input_type=Match | list[Match]),
        Field(min_length=1),
    ]
    cause: Cause = Cause.PLATFORM
    priority: int = 0  # breaks ties between equally specific runbooks; higher wins
    cordon: bool = True  # cordon as soon as the finding arrives (stops new work only)
    # The finding is a suspicion its first rung (a diagnose) proves: a fault the diagnose
    # finds hands the node to that fault's runbook; a pass ends the ladder ``unproven``.
    proves: bool = False
    tolerance: Duration = timedelta(0)  # how long the fault must persist before disrupting
    recheck_every: Duration | None = None  # re-probe inside the tolerance window
    # Verifying a rung for an Xid no probe sees: this long without that Xid again on that GPU
    # (remedy/ladder/verification.py). 0: look once, right after the rung.
    watch: Duration = timedelta(minutes=10)
    # The same fault on the same GPU this soon after a recovery: the rung that "recovered" it
    # did not, and the new ladder starts above it (remedy/ladder/recurrence.py). 0: never.
    recurrence_window: Duration = timedelta(hours=24)
    ladder: list[Rung] = []

    def specificity(self, finding: Finding, by_action: bool = False) -> int | None:
        """How narrowly this runbook matches the finding (None: it does not match).
        ``by_action``: only clauses that name NVIDIA's action count (the Xid's line asked for
        something other than what its code usually needs)."""
        scores = self.clause_scores(finding, by_action)
        return max(scores.values()) if scores else None

    def clause_scores(self, finding: Finding, by_action: bool = False) -> dict[int, int]:
        """Each clause that matches the finding, by its place in ``match``, with its
        specificity."""
        return {
            i: m.specificity
            for i, m in enumerate(self.match)
            if (m.nvidia_actions or not by_action) and m.matches(finding)
        }

    @model_validator(mode="after")
    def _check(self) -> Runbook:
        actions = [rung.action for rung in self.ladder]
        if self.cause is Cause.APPLICATION:
            banned = sorted({a.value for a in actions if ACTIONS[a].hardware})
            if banned:
                raise ValueError(
                    f"an application-caused fault must not reach hardware actions: {banned}"
                )
        if Action.REPLACE in actions[:-1]:  # ``rung``: the loader names that rung's line
            last = "replace must be the last rung: nothing runs after a replacement"
            raise PydanticCustomError("not_last", last, {"rung": actions.index(Action.REPLACE)})
        if self.proves and (self.cordon or actions[:1] != [Action.DIAGNOSE]):
            raise ValueError(
                "a runbook that proves a suspicion does not cordon (the suspect keeps its work "
                "until proven) and its first rung is diagnose"
            )
        if self.recheck_every is not None and self.recheck_every <= timedelta(0):
            raise ValueError("recheck_every must be longer than 0s")
        if self.watch < timedelta(0) or self.recurrence_window < timedelta(0):
            raise ValueError("watch and recurrence_window must not be negative")
        return self

    def scaled(self, speedup: float) -> Runbook:
        """The same runbook with every duration divided by ``speedup`` (demo and rehearsal)."""

        def shrink(d: timedelta) -> timedelta:
            return timedelta(seconds=d.total_seconds() / speedup)

        rungs = [
            rung.model_copy(
                update={
                    "timeout": shrink(rung.timeout),
                    "settle": shrink(rung.settle),
                    "approval_timeout": shrink(rung.approval_timeout),
                    "retry": rung.retry.model_copy(
                        update={
                            "initial_interval": shrink(rung.retry.initial_interval),
                            "max_interval": shrink(rung.retry.max_interval),
                        }
                    ),
                }
            )
            for rung in self.ladder
        ]
        recheck = shrink(self.recheck_every) if self.recheck_every else None
        return self.model_copy(
            update={
                "tolerance": shrink(self.tolerance),
                "recheck_every": recheck,
                "watch": shrink(self.watch),
                "recurrence_window": shrink(self.recurrence_window),
                "ladder": rungs,
            }
        )


class _AuthorsSchema(GenerateJsonSchema):
    def encode_default(self, dft: Any) -> Any:
        # Defaults as an author writes them (10m), not as ISO 8601 (PT10M).
        return format_duration(dft) if isinstance(dft, timedelta) else super().encode_default(dft)


def json_schema() -> dict[str, Any]:
    """The runbook file format as JSON Schema (``remedy runbooks schema``), for editors: the
    YAML language server completes and checks a runbook that names it."""
    schema = Runbook.model_json_schema(mode="validation", schema_generator=_AuthorsSchema)
    for model in [schema, *schema.get("$defs", {}).values()]:
        if "properties" in model:  # as the loader reads a file: unknown fields are errors
            model["additionalProperties"] = False
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "remedy runbook",
        **{k: v for k, v in schema.items() if k != "title"},
    }
