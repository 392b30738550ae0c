"""The slow member of a failing pair, found by re-pairing (remedy/scan/pairs.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from adapters.sim.fabric import write_bw_output
from remedy.detection.fabric.verdict import BANDWIDTH_LOW, FabricVerdict, judge_write_bw
from remedy.scan.pairs import blame, next_round, pair_findings, pair_up


def test_the_issues_example_blames_b() -> None:
    found = blame({("A", "B"): False, ("A", "C"): True, ("B", "D"): False})

    assert found.slow == ["B"]
    assert found.cleared == ["A", "C"]
    # (B,D) is explained by B: D is not blamed, and nothing is left to decide.
    assert found.undecided == [] and found.next_pairs == []


def test_a_failing_pair_with_nothing_known_is_re_paired_with_cleared_nodes() -> None:
    found = blame({("A", "B"): False, ("C", "D"): True, ("E", "F"): True})

    assert found.slow == [] and found.undecided == ["A", "B"]
    assert found.next_pairs == [("A", "C"), ("B", "D")]


def test_the_re_pairing_decides() -> None:
    first = {("A", "B"): False, ("C", "D"): True, ("E", "F"): True}
    then = first | {("A", "C"): True, ("B", "D"): False}

    found = blame(then)

    assert found.slow == ["B"] and found.undecided == []


def test_with_no_cleared_node_the_failing_pairs_are_crossed() -> None:
    found = blame({("A", "B"): False, ("C", "D"): False})

    assert found.undecided == ["A", "B", "C", "D"]
    assert found.next_pairs == [("A", "C"), ("B", "D")]


def test_crossing_again_skips_pairs_already_tried() -> None:
    tried = {("A", "B"): False, ("C", "D"): False, ("A", "C"): False, ("B", "D"): False}

    assert blame(tried).next_pairs == [("A", "D"), ("B", "C")]


def test_two_cleared_nodes_that_fail_together_blame_their_path() -> None:
    found = blame({("A", "C"): True, ("B", "D"): True, ("A", "B"): False})

    assert found.slow == [] and found.paths == [("A", "B")]


def test_a_slow_node_is_not_offered_as_a_partner() -> None:
    found = blame({("A", "B"): False, ("A", "C"): True, ("E", "F"): False})

    assert found.slow == ["B"]
    assert found.next_pairs == [("E", "A"), ("F", "C")]


def test_first_round_pairs_neighbours() -> None:
    assert pair_up(["n3", "n1", "n2", "n4", "n5"]) == [("n1", "n2"), ("n3", "n4")]


def test_the_rounds_pair_neighbours_then_re_pair_and_take_the_odd_one_out() -> None:
    nodes = ["A", "B", "C", "D", "E"]
    assert next_round(nodes, {}) == [("A", "B"), ("C", "D")]  # E waits: no partner yet
    first = {("A", "B"): False, ("C", "D"): True}
    # A and B each with a cleared node; E, untested, with none left free this round.
    assert next_round(nodes, first) == [("A", "C"), ("B", "D")]
    assert next_round(["A", "B", "C"], {("A", "B"): True}) == [("C", "A")]
    assert next_round(nodes, first | {("A", "C"): True, ("B", "D"): False}) == [("E", "A")]


def _verdict(pair: tuple[str, str], gbps: float) -> FabricVerdict:
    return judge_write_bw(write_bw_output(gbps), list(pair), 400)


def test_each_node_gets_its_findings_the_slow_one_critical() -> None:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    verdicts = {
        ("A", "B"): _verdict(("A", "B"), 150),
        ("C", "D"): _verdict(("C", "D"), 390),
        ("A", "C"): _verdict(("A", "C"), 390),
        ("B", "D"): _verdict(("B", "D"), 150),
    }
    found = pair_findings(["A", "B", "C", "D"], verdicts, now)

    assert [f.unhealthy for f in found["B"]] == [True, True]
    assert "B is the slow member: A passed with another node" in found["B"][0].evidence
    assert found["B"][0].reason == BANDWIDTH_LOW
    # A's failing pair is explained by B: info, as are the pairs that passed.
    assert not any(f.unhealthy for n in "ACD" for f in found[n])
    assert "explained by B" in found["A"][0].evidence


def test_a_pair_with_no_one_to_clear_it_fails_both_and_a_path_blames_neither() -> None:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    alone = pair_findings(["A", "B"], {("A", "B"): _verdict(("A", "B"), 150)}, now)
    assert all(f.unhealthy and "undecided" in f.evidence for n in "AB" for f in alone[n])

    path = {
        ("A", "B"): _verdict(("A", "B"), 150),
        ("A", "C"): _verdict(("A", "C"), 390),
        ("B", "D"): _verdict(("B", "D"), 390),
    }
    found = pair_findings(["A", "B", "C", "D"], path, now)
    assert not any(f.unhealthy for fs in found.values() for f in fs)
    assert "the path between two nodes" in found["A"][0].evidence
