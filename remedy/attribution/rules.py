"""Attribution rules: an ordered list in a YAML file; the first rule whose conditions all hold
decides. Each condition that holds says why, in words, and that is the evidence.

The shipped rules are ``rules.yaml`` next to this module; an operator's own file replaces
them whole (rules are order-sensitive, so there is no merging)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from remedy.attribution.model import Attribution, PodFailure, Verdict, XidSeen
from remedy.core.durations import Duration
from remedy.core.models import Severity
from remedy.core.yaml_source import YamlFileError, load_model
from remedy.xid import XidCatalog, load_catalog
from remedy.xid.actions import XidAction

RULES_FILE = Path(__file__).with_name("rules.yaml")
ANY = "*"


class When(BaseModel):
    """The conditions of a rule; every one that is set must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    disruption: list[str] = []  # the pod's DisruptionTarget reason ("*": any)
    termination_reason: list[str] = []
    exit_codes: list[int] = []
    node_gone: bool | None = None
    hardware_xid_on_node: bool | None = None  # an Xid of a hardware class on the pod's node
    remediation_on_node: str | None = None  # platform | application | "*": a ladder there
    # A fault on any node of the job (an unhealthy finding, a hardware Xid, a platform
    # ladder); false: nothing at all was seen there.
    fault_on_job_nodes: bool | None = None
    log: list[str] = []  # regular expressions, any of which matches the log tail
    app_xid_of_job: bool | None = None  # an application-class Xid raised by this job
    app_xid_gpus: int | None = Field(default=None, ge=1)  # … on at least this many GPUs
    app_xid_same_gpu_jobs: int | None = Field(default=None, ge=2)  # one GPU, this many jobs

    @field_validator("log")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            re.compile(pattern)
        return patterns


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    verdict: Verdict
    when: When
    why: str = ""  # one sentence for people: shown with the evidence
    # The pod's node is at fault: the guard puts it in remediation. Only where the evidence is
    # the node's own (an NCCL timeout on a healthy node, a drain or a preemption blame none).
    blame_node: bool = False

    @model_validator(mode="after")
    def _blame_needs_platform(self) -> Rule:
        if self.blame_node and self.verdict is not Verdict.PLATFORM:
            raise ValueError("blame_node: only a platform verdict blames the node")
        return self


class RuleSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window: Duration = timedelta(minutes=10)  # around the failure: what counts as "during"
    rules: list[Rule] = Field(min_length=1)


class RulesError(ValueError):
    pass


def load_rules(path: Path = RULES_FILE) -> RuleSet:
    """All or nothing: a broken file is one ``FILE:LINE: FIELD: problem`` line per problem."""
    try:
        return load_model(path, RuleSet)
    except YamlFileError as exc:
        raise RulesError(str(exc)) from None


class Attributor:
    """Decides with a rule set and the Xid catalog (which Xids are the application's)."""

    def __init__(self, rules: RuleSet | None = None, catalog: XidCatalog | None = None) -> None:
        self.rules = rules or load_rules()
        self._catalog = catalog or load_catalog()

    def attribute(self, failure: PodFailure) -> Attribution:
        for rule in self.rules.rules:
            evidence = self._holds(rule.when, failure)
            if evidence is not None:
                return Attribution(
                    verdict=rule.verdict,
                    rule=rule.name,
                    evidence=[rule.why, *evidence] if rule.why else evidence,
                    blame=failure.node if rule.blame_node else None,
                )
        return Attribution(
            verdict=Verdict.UNKNOWN,
            rule="no-rule-matched",
            evidence=["no rule matched what is known of this failure"],
        )

    # -- conditions: each returns the evidence when it holds, None when it does not --------
    def _holds(self, when: When, f: PodFailure) -> list[str] | None:
        checks: list[tuple[object, Callable[[], str | None]]] = [
            (when.disruption, lambda: self._disruption(when, f)),
            (when.termination_reason, lambda: _reason(when, f)),
            (when.exit_codes, lambda: _exit_code(when, f)),
            (
                when.node_gone,
                lambda: _flag(when.node_gone, f.node_gone, f"node {f.node} no longer exists"),
            ),
            (when.hardware_xid_on_node, lambda: self._hardware_xid(when, f)),
            (when.remediation_on_node, lambda: self._remediation(when, f)),
            (when.fault_on_job_nodes, lambda: self._fault_on_job_nodes(when, f)),
            (when.log, lambda: _log(when, f)),
            (when.app_xid_of_job, lambda: self._app_xid_of_job(when, f)),
            (when.app_xid_gpus, lambda: self._app_xid_gpus(when, f)),
            (when.app_xid_same_gpu_jobs, lambda: self._same_gpu_jobs(when, f)),
        ]
        evidence = []
        for setting, check in checks:
            if setting in (None, []):
                continue
            said = check()
            if said is None:
                return None
            evidence.append(said)
        return evidence

    def _near(self, at: datetime, f: PodFailure) -> bool:
        # A difference, not failed_at ± window: a sum near the end of the calendar overflows.
        return abs(at - f.failed_at) <= self.rules.window

    def _disruption(self, when: When, f: PodFailure) -> str | None:
        got = f.termination.disruption
        if got and (ANY in when.disruption or got in when.disruption):
            return f"the cluster took the pod away ({got})"
        return None

    def _application(self, xid: XidSeen) -> bool:
        return self._application_code(xid.code, xid.action)

    def _application_code(self, code: int, action: str | None) -> bool:
        """NVIDIA says restart the application (on a MIG instance too), or the catalog calls
        the code the application's: the job's evidence, never the node's."""
        decided = self._action(code, action)
        return (
            decided is XidAction.RESTART_APP
            or self._catalog.lookup(code).fault_class == "application"
        )

    def _action(self, code: int, action: str | None) -> XidAction:
        """The action the line asked for (Xid 154's recovery), else the catalog's."""
        if action is not None and action in tuple(XidAction):
            return XidAction(action)
        return self._catalog.lookup(code).action  # none said, or one a newer remedy knows

    def _hardware(self, xid: XidSeen) -> bool:
        severity = self._catalog.lookup(xid.code).severity_for(self._action(xid.code, xid.action))
        return not self._application(xid) and severity is not Severity.INFO

    def _hardware_xid(self, when: When, f: PodFailure) -> str | None:
        seen = [x for x in f.xids if x.node == f.node and self._near(x.at, f) and self._hardware(x)]
        return _flag(
            when.hardware_xid_on_node,
            bool(seen),
            f"Xid {seen[0].code} ({self._catalog.lookup(seen[0].code).description}) on "
            f"GPU {seen[0].gpu} of {f.node} at {seen[0].at:%H:%M:%S}"
            if seen
            else "no hardware Xid on the node",
        )

    def _remediation(self, when: When, f: PodFailure) -> str | None:
        window = self.rules.window
        for r in f.remediations:
            overlaps = r.started_at - f.failed_at <= window and (
                r.ended_at is None or f.failed_at - r.ended_at <= window
            )
            if r.node == f.node and overlaps and when.remediation_on_node in (ANY, r.cause):
                return f"remedy was remediating {r.node} ({r.runbook}, {r.cause} cause" + (
                    f", {r.outcome})" if r.outcome else ")"
                )
        return None

    def _fault_on_job_nodes(self, when: When, f: PodFailure) -> str | None:
        seen = self._fault_seen(f)
        return _flag(
            when.fault_on_job_nodes,
            seen is not None,
            seen or "no finding, hardware Xid or platform ladder on any node of the job",
        )

    def _fault_seen(self, f: PodFailure) -> str | None:
        for finding in f.findings:
            # A rank's own Xid 13 is the code's fault: the ranks it stalled are not the node's.
            application = finding.xid is not None and self._application_code(
                finding.xid, finding.nvidia_action
            )
            if finding.unhealthy and not application and self._near(finding.observed_at, f):
                return f"{finding.check} finding on {finding.node}: {finding.headline()}"
        for xid in f.xids:
            if self._hardware(xid) and self._near(xid.at, f):
                return f"Xid {xid.code} on GPU {xid.gpu} of {xid.node}"
        for ladder in f.remediations:
            if ladder.cause == "platform":
                return f"remedy was remediating {ladder.node} ({ladder.runbook})"
        return None

    def _app_xids_of_job(self, f: PodFailure) -> list[XidSeen]:
        return [
            x for x in f.xids if self._application(x) and x.job == f.job and self._near(x.at, f)
        ]

    def _app_xid_of_job(self, when: When, f: PodFailure) -> str | None:
        mine = self._app_xids_of_job(f)
        return _flag(
            when.app_xid_of_job,
            bool(mine),
            f"Xid {mine[0].code} raised by the job's own process "
            f"{mine[0].process or mine[0].pid} on GPU {mine[0].gpu}"
            if mine
            else "no application Xid from this job",
        )

    def _app_xid_gpus(self, when: When, f: PodFailure) -> str | None:
        gpus = sorted({x.gpu for x in self._app_xids_of_job(f)})
        assert when.app_xid_gpus is not None
        if len(gpus) >= when.app_xid_gpus:
            return (
                f"application Xids from this job on {len(gpus)} different GPUs "
                f"({', '.join(gpus)}): the code, not one bad GPU"
            )
        return None

    def _same_gpu_jobs(self, when: When, f: PodFailure) -> str | None:
        assert when.app_xid_same_gpu_jobs is not None
        for gpu in sorted({x.gpu for x in self._app_xids_of_job(f)}):
            jobs = {
                x.job
                for x in [*f.xid_history, *f.xids]
                if x.gpu == gpu and self._application(x) and x.job
            }
            if len(jobs) >= when.app_xid_same_gpu_jobs:
                return (
                    f"GPU {gpu} raised application Xids under {len(jobs)} different jobs "
                    f"({', '.join(sorted(jobs))}): the GPU, not the code"
                )
        return None


def _reason(when: When, f: PodFailure) -> str | None:
    if f.termination.reason in when.termination_reason:
        return f"the container ended {f.termination.reason}"
    return None


def _exit_code(when: When, f: PodFailure) -> str | None:
    code = f.termination.exit_code
    return f"exit code {code}" if code is not None and code in when.exit_codes else None


def _log(when: When, f: PodFailure) -> str | None:
    for pattern in when.log:
        found = re.search(pattern, f.log_tail, re.IGNORECASE | re.MULTILINE)
        if found:
            line = next(
                (ln for ln in f.log_tail.splitlines() if found.group(0) in ln), found.group(0)
            )
            return f"log: {line.strip()[:160]}"
    return None


def _flag(wanted: bool | None, actual: bool, said: str) -> str | None:
    return said if wanted == actual else None
