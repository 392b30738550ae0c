"""Pick the runbook for a finding: the most specific match, else a conservative default."""

from __future__ import annotations

from collections.abc import Iterable

from remedy.core.models import Finding, Severity
from remedy.runbook.schema import Match, Runbook
from remedy.xid.actions import XidAction
from remedy.xid.catalog import load_catalog

# A finding nobody wrote a runbook for: stop new work landing on the node and hold for a human.
# Never disruptive, never a replacement, and never "healthy".
DEFAULT_RUNBOOK = Runbook(
    name="default-unknown-fault",
    description="No runbook matches this finding: cordon and hold for a human.",
    match=[Match(severities=[Severity.WARNING, Severity.CRITICAL])],
    priority=-1_000_000,
    cordon=True,
    ladder=[],
)


class RunbookSet:
    """A validated set of runbooks; matching is a pure function of the finding."""

    def __init__(self, runbooks: Iterable[Runbook]) -> None:
        self._runbooks = sorted(runbooks, key=lambda r: r.name)
        self._by_name = {r.name: r for r in self._runbooks}

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._runbooks)

    def __len__(self) -> int:
        return len(self._runbooks)

    def get(self, name: str) -> Runbook:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(self._by_name) or "none loaded"
            raise KeyError(f"no runbook named {name!r} (known: {known})") from None

    def match(self, finding: Finding) -> Runbook | None:
        """The most specific matching runbook; ties go to priority, then name (stable).

        An unhealthy finding that no runbook matches gets DEFAULT_RUNBOOK, never nothing; an
        informational finding that no runbook asks for, or an Xid NVIDIA says to ignore, needs
        no remediation (None).
        """
        scoring = as_scored(finding)
        if scoring is None:
            return None
        finding, by_action = scoring
        scored = [
            (score, r)
            for r in self._runbooks
            if (score := r.specificity(finding, by_action)) is not None
        ]
        if not scored:
            return DEFAULT_RUNBOOK if finding.unhealthy else None
        return max(scored, key=lambda s: rank(*s))[1]

    def named_for(self, name: str, finding: Finding) -> Runbook:
        """The runbook ``name`` of this set when it matches ``finding`` — what a node's agent
        may ask for: a runbook the controller has, for the fault it reports (the default one
        for any unhealthy finding). ValueError saying why not: for example, an agent asking for
        gpu-fallen-off-bus with an Xid 13 is refused with "runbook gpu-fallen-off-bus does not
        match Xid 13 on GPU 0"."""
        if name == DEFAULT_RUNBOOK.name and finding.unhealthy:
            return DEFAULT_RUNBOOK
        runbook = self._by_name.get(name)
        if runbook is None:
            raise ValueError(f"asks for runbook {name!r}, which the controller does not have")
        scoring = as_scored(finding)
        if scoring is None:
            raise ValueError(f"{finding.headline()} needs no remediation (NVIDIA: ignore)")
        if runbook.specificity(*scoring) is None:
            raise ValueError(f"runbook {name!r} does not match {finding.headline()}")
        return runbook

    def has(self, name: str) -> Runbook | None:
        """The runbook ``name`` (the default one by its name too); None: not in this set."""
        return DEFAULT_RUNBOOK if name == DEFAULT_RUNBOOK.name else self._by_name.get(name)


def as_scored(finding: Finding) -> tuple[Finding, bool] | None:
    """The finding as runbooks are scored against it — NVIDIA's action filled in — and whether
    only clauses that name that action count; None: nothing is to match it."""
    finding = with_nvidia_action(finding)
    if finding.nvidia_action == XidAction.IGNORE:
        # NVIDIA says nothing is needed (a 74 whose registers are benign, a 154 asking for
        # "None"): recorded, never remediated, whichever runbook names the code.
        return None
    # A runbook that names an Xid by number was written for what that code usually needs;
    # when the line asked for something else (a 74 whose registers say "report a bug", a
    # 154 naming a reboot), only a clause naming that action may take it.
    return finding, _decided_by_its_line(finding)


def rank(score: int, runbook: Runbook) -> tuple[int, int, tuple[int, ...]]:
    """The tie-break among matching runbooks, highest first: the most specific, then the
    highest priority, then the alphabetically first name."""
    return score, runbook.priority, _reverse_name(runbook.name)


def with_nvidia_action(finding: Finding) -> Finding:
    """An Xid finding that does not say NVIDIA's action gets the catalog's for its code: one
    from an older agent, from NVML's Xid events (no message to decode) or rebuilt from a node
    condition (which keeps only the reason). What the message decided is lost there, so the
    catalog's action (e.g. contact_support for Xid 154) stands in."""
    usual = _usual_action(finding)
    if usual is None or finding.nvidia_action is not None:
        return finding
    return finding.model_copy(update={"nvidia_action": usual.value})


def _decided_by_its_line(finding: Finding) -> bool:
    usual = _usual_action(finding)
    return usual is not None and finding.nvidia_action not in (None, usual.value)


def _usual_action(finding: Finding) -> XidAction | None:
    """What the catalog says an Xid of this code needs (None: not an Xid)."""
    if finding.xid is None:
        return None
    return load_catalog().lookup(finding.xid, finding.component.architecture).action


def _reverse_name(name: str) -> tuple[int, ...]:
    # max() should prefer the alphabetically first name on a full tie.
    return tuple(-ord(c) for c in name)
