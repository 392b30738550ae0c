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

from itertools import combinations

from remedy.core.models import Frozen

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
