"""The slow member of a failing pair, found by re-pairing (remedy/scan/pairs.py)."""

from __future__ import annotations

from remedy.scan.pairs import blame, pair_up


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
