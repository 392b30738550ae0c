"""The runbook schema. A runbook says what it matches, how long to tolerate, and the ladder."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import GenerateJsonSchema

from remedy.durations import Duration, format_duration
from remedy.models import HARDWARE_ACTIONS, Action, Finding, Severity


class Strict(BaseModel):
    # Unknown fields are errors: a typo must not silently become a default.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Cause(StrEnum):
    PLATFORM = "platform"  # the machine is at fault: hardware actions allowed
    APPLICATION = "application"  # the job is at fault: never reset, reboot or replace


class Approval(StrEnum):
    NONE = "none"
    REQUIRED = "required"


class RetryPolicy(Strict):
    max_attempts: int = Field(default=3, ge=1, le=100)
    initial_interval: Duration = timedelta(seconds=10)
    backoff: float = Field(default=2.0, ge=1.0, le=10.0)
    max_interval: Duration = timedelta(minutes=5)


class Rung(Strict):
    action: Action
    timeout: Duration = timedelta(minutes=10)
    retry: RetryPolicy = RetryPolicy()
    settle: Duration = timedelta(0)  # wait after the action before verifying
    # Re-probe after the rung and stop climbing if healthy. Default: yes for actions that can fix
    # a fault; no for cordon, drain (preparation) and replace (the node is gone).
    verify: bool | None = None
    approval: Approval = Approval.NONE
    approval_timeout: Duration = timedelta(hours=4)

    @model_validator(mode="after")
    def _check(self) -> Rung:
        if self.action is Action.RESTORE:
            raise ValueError("restore is not a rung: remedy restores a node once a rung verifies")
        if self.timeout <= timedelta(0):
            raise ValueError("timeout must be longer than 0s")
        return self

    @property
    def verifies(self) -> bool:
        if self.verify is not None:
            return self.verify
        return self.action not in (Action.CORDON, Action.DRAIN, Action.REPLACE)


FROM_CONDITION = "condition"  # the check of a finding the fleet scan rebuilt from a condition


class Match(Strict):
    """A finding matches when every non-empty list contains its value."""

    checks: list[str] = []
    xids: list[int] = []
    reasons: list[str] = []
    severities: list[Severity] = []

    def matches(self, finding: Finding) -> bool:
        if finding.check == FROM_CONDITION:
            # Rebuilt from a node condition, which keeps the reason (and Xid) but not the
            # check: match on those alone, and never on a check name alone.
            return bool(self.reasons or self.xids) and self._matches_beyond_check(finding)
        return (not self.checks or finding.check in self.checks) and self._matches_beyond_check(
            finding
        )

    def _matches_beyond_check(self, finding: Finding) -> bool:
        return (
            (not self.xids or finding.xid in self.xids)
            and (not self.reasons or finding.reason in self.reasons)
            and (not self.severities or finding.severity in self.severities)
        )

    @property
    def specificity(self) -> int:
        # Narrower criteria win: an Xid code says more than a check name.
        return (
            8 * bool(self.xids)
            + 4 * bool(self.reasons)
            + 2 * bool(self.checks)
            + bool(self.severities)
        )

    @model_validator(mode="after")
    def _not_empty(self) -> Match:
        if not (self.checks or self.xids or self.reasons or self.severities):
            raise ValueError("match needs at least one of checks, xids, reasons, severities")
        return self


def _as_list(value: object) -> object:
    return [value] if isinstance(value, dict | Match) else value


class Runbook(Strict):
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
    tolerance: Duration = timedelta(0)  # how long the fault must persist before disrupting
    recheck_every: Duration | None = None  # re-probe inside the tolerance window
    ladder: list[Rung] = []

    def specificity(self, finding: Finding) -> int | None:
        """How narrowly this runbook matches the finding (None: it does not match)."""
        scores = [m.specificity for m in self.match if m.matches(finding)]
        return max(scores) if scores else None

    @model_validator(mode="after")
    def _check(self) -> Runbook:
        actions = [rung.action for rung in self.ladder]
        if self.cause is Cause.APPLICATION:
            banned = sorted({a.value for a in actions} & {a.value for a in HARDWARE_ACTIONS})
            if banned:
                raise ValueError(
                    f"an application-caused fault must not reach hardware actions: {banned}"
                )
        if Action.REPLACE in actions[:-1]:
            raise ValueError("replace must be the last rung: nothing runs after a replacement")
        if self.recheck_every is not None and self.recheck_every <= timedelta(0):
            raise ValueError("recheck_every must be longer than 0s")
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
            update={"tolerance": shrink(self.tolerance), "recheck_every": recheck, "ladder": rungs}
        )


class _AuthorsSchema(GenerateJsonSchema):
    def encode_default(self, dft: Any) -> Any:
        # Defaults as an author writes them (10m), not as ISO 8601 (PT10M).
        return format_duration(dft) if isinstance(dft, timedelta) else super().encode_default(dft)


def json_schema() -> dict[str, Any]:
    """The runbook file format as JSON Schema (``remedy runbooks schema``), for editors: the
    YAML language server completes and checks a runbook that names it."""
    schema = Runbook.model_json_schema(mode="validation", schema_generator=_AuthorsSchema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "remedy runbook",
        **{k: v for k, v in schema.items() if k != "title"},
    }
