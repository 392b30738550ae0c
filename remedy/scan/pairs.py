"""Which member of a failing pair is slow: found by re-pairing. Pure.

A pair test (ib_write_bw, an all-reduce across two nodes) that fails says one of its two nodes,
or the path between them, is slow, not which. A node in a pair that passed is cleared; a failing
pair with one member cleared blames the other. With (A,B) failing, (A,C) passing and (B,D)
failing: A is cleared, so B is slow; (B,D) is explained by B, and D stays untested, not blamed.
A failing pair with neither member known is re-paired, each with a cleared node (or, with none
cleared yet, across the failing pairs: (A,B) and (C,D) failing are tried as (A,C) and (B,D)).
A failing pair of two cleared nodes blames the path between them, not either node.
"""

from __future__ import annotations

from datetime import datetime
from itertools import combinations

from remedy.core.models import Finding, Frozen, Severity
from remedy.detection.fabric.verdict import FabricVerdict

Pair = tuple[str, str]


class PairBlame(Frozen):
    slow: list[str] = []  # blamed: each in a failing pair whose other member is cleared
    cleared: list[str] = []  # in a pair that passed
    undecided: list[str] = []  # only in failing pairs, no partner cleared: to re-pair
    paths: list[Pair] = []  # failing pairs of two cleared nodes: the path between them
    next_pairs: list[Pair] = []  # what to test next to decide the undecided


def blame(results: dict[Pair, bool]) -> PairBlame:
    """``results``: each pair tested and whether it passed (a pair tested twice: the last)."""
    cleared = {node for pair, passed in results.items() if passed for node in pair}
    failing = [pair for pair, passed in results.items() if not passed]
    slow: set[str] = set()
    paths: list[Pair] = []
    for a, b in failing:
        if a in cleared and b in cleared:
            paths.append((a, b))
        elif a in cleared:
            slow.add(b)
        elif b in cleared:
            slow.add(a)
    undecided = {
        node
        for pair in failing
        if not slow.intersection(pair)
        for node in pair
        if node not in cleared
    }
    tried = {frozenset(pair) for pair in results}
    return PairBlame(
        slow=sorted(slow),
        cleared=sorted(cleared),
        undecided=sorted(undecided),
        paths=sorted(paths),
        next_pairs=_next_pairs(sorted(undecided), sorted(cleared - slow), tried),
    )


def _next_pairs(undecided: list[str], good: list[str], tried: set[frozenset[str]]) -> list[Pair]:
    """Each undecided node with a cleared node it was not tested with, one good node each while
    they last (the tests run at once); with no cleared node, undecided nodes in pairs not tried."""
    pairs: list[Pair] = []
    busy: set[str] = set()
    for node in undecided:
        partner = next(
            (g for g in good if g not in busy and frozenset((node, g)) not in tried), None
        )
        if partner is not None:
            pairs.append((node, partner))
            busy.update((node, partner))
    if good:
        return pairs
    for a, b in combinations(undecided, 2):
        if a not in busy and b not in busy and frozenset((a, b)) not in tried:
            pairs.append((a, b))
            busy.update((a, b))
    return pairs


def pair_up(nodes: list[str]) -> list[Pair]:
    """The first round: neighbours in name order, (n1,n2), (n3,n4); an odd one out waits for
    the next round (or is paired once a node is cleared)."""
    ordered = sorted(nodes)
    return [(ordered[i], ordered[i + 1]) for i in range(0, len(ordered) - 1, 2)]


def next_round(nodes: list[str], results: dict[Pair, bool]) -> list[Pair]:
    """The pairs to test next: the first round's neighbours, then the re-pairing of the
    undecided, and each node not tested yet (the odd one out) with a cleared node still free.
    Empty: everything that can be decided is."""
    if not results:
        return pair_up(nodes)
    found = blame(results)
    pairs = list(found.next_pairs)
    busy = {node for pair in pairs for node in pair}
    tested = {node for pair in results for node in pair}
    free = [n for n in found.cleared if n not in busy and n not in found.slow]
    for node in sorted(set(nodes) - tested):
        if free:
            partner = free.pop(0)
            pairs.append((node, partner))
            busy.update((node, partner))
    return pairs


def pair_findings(
    nodes: list[str], verdicts: dict[Pair, FabricVerdict], now: datetime
) -> dict[str, list[Finding]]:
    """Each node's findings from the pairs it was in. Critical: the slow member (its failing
    pair, and the cleared partner that clears the other), and, fail closed, a node still
    undecided when re-pairing ran out. Info: a pair that passed, a failing pair explained by
    the partner's slowness, and a failing path between two cleared nodes (neither node's)."""
    found = blame({pair: v.passed for pair, v in verdicts.items()})
    out: dict[str, list[Finding]] = {node: [] for node in nodes}
    for pair, verdict in verdicts.items():
        for node in pair:
            other = pair[1] if node == pair[0] else pair[0]
            finding = verdict.finding(node, now)
            if verdict.passed:
                why = ""
            elif node in found.slow and other in found.cleared:
                why = f"{node} is the slow member: {other} passed with another node"
            elif node in found.undecided:
                why = "undecided: re-pairing found no partner to clear either node"
            elif other in found.slow:
                why, finding = f"explained by {other}, the slow member", _info(finding)
            else:
                why, finding = "the path between two nodes cleared by other pairs", _info(finding)
            evidence = f"{finding.evidence} ({why})" if why else finding.evidence
            out.setdefault(node, []).append(
                finding.model_copy(update={"evidence": evidence[:1024]})
            )
    return out


def _info(finding: Finding) -> Finding:
    return finding.model_copy(update={"severity": Severity.INFO})
