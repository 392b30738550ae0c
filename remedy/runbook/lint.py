"""Runbooks that load but probably do not do what their author meant: `remedy runbooks
validate` prints these as warnings (exit 0; 1 with ``--strict``), each naming file, line and
field as a loading error does. Pure functions of the loaded runbooks and their lines.

- **Disruption for a fault that passes by itself.** A disruptive rung (drain, kill_job,
  reset_gpu, reboot, replace: ``ACTIONS[...].disruptive``) with no ``approval: required`` in a
  runbook that matches a transient check (``transient`` in remedy/detection/vocabulary.py: thermal)
  and
  acts at once (``tolerance: 0s``). A tolerance window answers it: the ladder reaches the rung
  only after a re-probe at the window's end still sees the fault, so it did not pass.
- **An empty ladder that does next to nothing**: with no cordon, a finding changes nothing on
  the node; with a cordon and no tolerance window, the node is cordoned for a person and remedy
  never looks at it again. (``orphaned-cordon`` re-probes in its window and gives a healthy
  node back: not warned.)
- **A node-level rung forced on an undrained node** (``if_not_drained: force``): a reboot, a
  replace or a node-wide reset with no node drain before it runs with the node's pods on it,
  where the ladder would otherwise drain the node first (remedy/runbook/undrained.py).
- **Overlapping matches**: a finding two runbooks match at the same specificity, which the
  matcher gives to one by priority or, failing that, by name (warned at the other's clause,
  naming the winner and why); and a clause that loses every finding it matches to more
  specific ones, so it never takes any. An overlap of different specificity where both still
  take findings is how runbooks are layered (one naming Xid 79 over one for every ``reboot``
  Xid) and is not warned. Every finding remedy can make is tried (each check's reasons, each
  SXid fatality, every catalogued Xid with each action NVIDIA may ask for it) through the
  matcher's own scoring and tie-break (``as_scored``, ``rank``).

Worked example: ``a.yaml`` and ``b.yaml`` both say ``match: {xids: [79]}``: for Xid 79 both
score 8 and neither has a priority, so ``a`` wins by name and ``b.yaml:2: match[0]`` is warned:
"runbook b overlaps runbook a (a.yaml:2 match[0]) at the same specificity for Xid 79 (reboot):
a wins (same priority, so the name first in order)". A ``c.yaml`` matching ``{checks: [xid],
reasons: [Xid79]}`` scores 6 and is warned: "runbook c never takes a finding by this clause:
every one it matches (Xid 79 (reboot)) goes to a more specific match of a (a.yaml:2
match[0])".
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import NamedTuple

from remedy.core.actions import ACTIONS
from remedy.core.models import Finding, Severity
from remedy.detection import vocabulary
from remedy.detection.probe.sxids import sxid_findings
from remedy.runbook.advice import ARCHITECTURES
from remedy.runbook.authored import Approval
from remedy.runbook.drain_first import clearing_rung
from remedy.runbook.loader import RunbookProblem, RunbookSource
from remedy.runbook.matcher import as_scored, rank
from remedy.runbook.schema import Match, Rung
from remedy.runbook.undrained import IfNotDrained
from remedy.xid.actions import SEVERITY, XidAction
from remedy.xid.catalog import Decoder, load_catalog
from remedy.xid.nvswitch import ACTIONS as NVSWITCH_ACTIONS
from remedy.xid.nvswitch import SXidEvent

EXAMPLES = 3  # findings named per overlap; the rest are counted


def lint(sources: list[RunbookSource]) -> list[RunbookProblem]:
    """Every warning about the runbooks, by file, then line."""
    warnings = [w for source in sources for w in disrupts_for_transient(source)]
    warnings += [w for source in sources if (w := empty_ladder(source)) is not None]
    warnings += [w for source in sources for w in forced_undrained(source)]
    warnings += overlaps(sources)
    return sorted(warnings, key=lambda w: (w.file, w.line, w.field))


# -- disruption for a transient fault -------------------------------------------------------
def transient_checks(clause: Match) -> list[str]:
    """The transient checks a clause matches, when those are all it can match (none: it can
    match something that lasts, or it names no check or reason to tell)."""
    named = clause.checks or [str(vocabulary.check_of(r)) for r in clause.reasons]
    terms = vocabulary.checks()
    if clause.xids or clause.nvidia_actions or not named:
        return []
    if all(c in terms and terms[c].transient for c in named):
        return sorted(set(named))
    return []


def disrupts_for_transient(source: RunbookSource) -> list[RunbookProblem]:
    runbook = source.runbook
    transient = sorted({c for clause in runbook.match for c in transient_checks(clause)})
    if not transient or runbook.tolerance:
        return []
    passing = ", ".join(f"{c} ({vocabulary.checks()[c].says})" for c in transient)
    return [
        RunbookProblem(
            source.file,
            source.line_of(("ladder", i, "action")),
            f"ladder[{i}]",
            f"{rung.action.value} is disruptive and needs no approval, yet the runbook acts at "
            f"once (tolerance 0s) on {passing}, whose faults often pass by themselves: add "
            "`approval: required`, or a tolerance window the fault must outlast",
        )
        for i, rung in enumerate(runbook.ladder)
        if ACTIONS[rung.action].disruptive and rung.approval is not Approval.REQUIRED
    ]


# -- an empty ladder ------------------------------------------------------------------------
def empty_ladder(source: RunbookSource) -> RunbookProblem | None:
    runbook = source.runbook
    if runbook.ladder:
        return None
    if not runbook.cordon:
        why = "and no cordon: a finding it matches changes nothing on the node"
    elif not runbook.tolerance:
        why = (
            "and no tolerance window: a finding it matches cordons the node for a person and "
            "remedy never looks at it again (add a rung, or a window whose re-probe gives a "
            "healthy node back)"
        )
    else:
        return None
    return RunbookProblem(source.file, source.line_of(("ladder",)), "ladder", f"empty, {why}")


# -- a node-level rung forced on an undrained node ------------------------------------------
def forced_undrained(source: RunbookSource) -> list[RunbookProblem]:
    ladder = source.runbook.ladder
    return [
        RunbookProblem(
            source.file,
            source.line_of(("ladder", i, "if_not_drained")),
            f"ladder[{i}].if_not_drained",
            _forced(ladder, i),
        )
        for i, rung in enumerate(ladder)
        if rung.if_not_drained is IfNotDrained.FORCE
    ]


def _forced(ladder: list[Rung], at: int) -> str:
    action = ladder[at].action.value
    before = clearing_rung(ladder, at)
    if before is not None:
        return f"force does nothing here: the node is drained at ladder[{before}], before {action}"
    return (
        f"{action} runs on the node as it is, with its pods on it: no node drain comes before "
        "it, and force skips the one the ladder would run first (drop it, or add a drain rung)"
    )


# -- overlapping matches --------------------------------------------------------------------
class _Claim(NamedTuple):
    score: int
    source: RunbookSource
    clause: int

    @property
    def at(self) -> tuple[str, int]:
        return self.source.file, self.clause


class _Contest:
    """Who took which finding: for each clause, the findings it won, and those it lost, by
    the clause that won them and whether at the same specificity."""

    def __init__(self) -> None:
        self.won: set[tuple[str, int]] = set()
        self.lost: dict[tuple[str, int], dict[tuple[str, int, bool], set[str]]] = {}

    def record(self, claims: list[_Claim], named: str) -> None:
        if not claims:
            return
        winner = max(claims, key=lambda c: rank(c.score, c.source.runbook))
        self.won.add(winner.at)
        for claim in claims:
            if claim is not winner:
                to = (*winner.at, claim.score == winner.score)
                self.lost.setdefault(claim.at, {}).setdefault(to, set()).add(named)


def overlaps(sources: list[RunbookSource]) -> list[RunbookProblem]:
    """One warning per runbook clause that ties with the winner of some finding (naming the
    winner, why it wins, and the findings), or that loses every finding it matches."""
    contest = _Contest()
    for finding in findings(sources):
        scoring = as_scored(finding)
        if scoring is not None:
            contest.record(list(_claims(sources, *scoring)), _named(scoring[0]))
    by_file = {s.file: s for s in sources}
    warnings = []
    for (file, clause), lost_to in contest.lost.items():
        ties = [(f, c, named) for (f, c, tie), named in lost_to.items() if tie]
        warnings += [
            _tie(by_file[file], clause, by_file[f], c, sorted(named)) for f, c, named in ties
        ]
        if not ties and (file, clause) not in contest.won:
            warnings.append(_shadowed(by_file, file, clause, lost_to))
    return warnings


def _claims(sources: list[RunbookSource], finding: Finding, by_action: bool) -> Iterator[_Claim]:
    for source in sources:
        scores = source.runbook.clause_scores(finding, by_action)
        if scores:
            best = max(scores.values())
            yield _Claim(best, source, min(i for i, s in scores.items() if s == best))


def _tie(
    loser: RunbookSource, clause: int, winner: RunbookSource, won_by: int, named: list[str]
) -> RunbookProblem:
    won, lost = winner.runbook, loser.runbook
    why = (
        f"priority {won.priority} over {lost.priority}"
        if won.priority != lost.priority
        else "same priority, so the name first in order"
    )
    return RunbookProblem(
        loser.file,
        loser.line_of(("match", clause)),
        f"match[{clause}]",
        f"runbook {lost.name} overlaps runbook {won.name} ({_where(winner, won_by)}) at the "
        f"same specificity for {_some(named)}: {won.name} wins ({why})",
    )


def _shadowed(
    by_file: dict[str, RunbookSource],
    file: str,
    clause: int,
    lost_to: dict[tuple[str, int, bool], set[str]],
) -> RunbookProblem:
    loser = by_file[file]
    winners = ", ".join(
        f"{by_file[f].runbook.name} ({_where(by_file[f], c)})" for f, c, _ in sorted(lost_to)
    )
    named = sorted({n for found in lost_to.values() for n in found})
    return RunbookProblem(
        file,
        loser.line_of(("match", clause)),
        f"match[{clause}]",
        f"runbook {loser.runbook.name} never takes a finding by this clause: every one it "
        f"matches ({_some(named)}) goes to a more specific match of {winners}",
    )


def _where(source: RunbookSource, clause: int) -> str:
    return f"{source.file}:{source.line_of(('match', clause))} match[{clause}]"


def _some(named: list[str]) -> str:
    more = f" and {len(named) - EXAMPLES} more" if len(named) > EXAMPLES else ""
    return ", ".join(named[:EXAMPLES]) + more


def _named(finding: Finding) -> str:
    if finding.xid is None:
        return f"{finding.check} {finding.reason}"
    return f"Xid {finding.xid} ({finding.nvidia_action})"


def findings(sources: list[RunbookSource]) -> Iterator[Finding]:
    """Every finding remedy can make, for matching: each reason of each check at each severity
    (an SXid's with the action its fatality carries), and every catalogued Xid and every Xid a
    runbook names with each action NVIDIA may ask for it on any GPU generation (any action,
    where the Xid's message decides)."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for terms in vocabulary.TERMS:
        if terms.check != vocabulary.NVSWITCH_CHECK:
            for reason in terms.reasons:
                for severity in Severity:
                    yield Finding(
                        node="-",
                        check=terms.check,
                        reason=reason,
                        severity=severity,
                        observed_at=at,
                    )
    for fatality, action in NVSWITCH_ACTIONS.items():
        event = SXidEvent(
            switch="nvswitch0",
            pci_bus_id="0000:00:00",
            code=0,
            fatality=fatality,
            action=action,
            severity=SEVERITY[action],
            line=1,
        )
        yield from sxid_findings("-", [event], None, at)
    catalog = load_catalog()
    named = {x for s in sources for clause in s.runbook.match for x in clause.xids}
    for xid in sorted(set(catalog.codes()) | named):
        infos = [catalog.lookup(xid, arch) for arch in ARCHITECTURES]
        decided = any(i.decode is not Decoder.NONE for i in infos)
        for action in list(XidAction) if decided else sorted({i.action for i in infos}):
            yield Finding(
                node="-",
                check=vocabulary.XID_CHECK,
                reason=f"Xid{xid}",
                xid=xid,
                severity=SEVERITY[action],
                observed_at=at,
                nvidia_action=action.value,
            )
