"""The docs' generated tables (tests/generated_docs.py) are what their code writes: the tables
of actions and of checks in docs/runbooks.md are the action table's (remedy/core/actions.py) and
the checks' own terms (remedy/detection/vocabulary.py gathers them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.generated_docs import REGIONS, ROOT, generated, regenerate, with_region


def test_every_committed_doc_is_what_its_code_generates() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in generated().items() if p.read_text() != text]
    assert not stale, f"run `python -m tests.generated_docs`: {stale} differ from their code"


def test_regenerating_rewrites_only_the_regions(tmp_path: Path) -> None:
    doc = tmp_path / REGIONS["actions"][0]
    doc.parent.mkdir(parents=True)
    marked = "\n".join(_markers(n) for n, (d, _) in REGIONS.items() if d == REGIONS["actions"][0])
    for other in {d for d, _ in REGIONS.values()} - {REGIONS["actions"][0]}:  # made up to date
        (tmp_path / other).write_text(
            "\n".join(_markers(n) for n, (d, _) in REGIONS.items() if d == other)
        )
    doc.write_text(with_region(f"before\n{marked}\nafter\n", "actions", "| stale |"))
    regenerate(tmp_path)
    doc.write_text(with_region(f"before\n{marked}\nafter\n", "actions", "| stale |"))
    assert regenerate(tmp_path) == [doc]
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n")
    assert "| stale |" not in text and "| `reboot` |" in text and "| `pcie` |" in text
    assert regenerate(tmp_path) == []


def test_a_doc_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no region"):
        with_region("no markers here\n", "actions", "| x |")


def _markers(name: str) -> str:
    from tests.generated_docs import begin, end

    return f"{begin(name)}\n\n{end(name)}"
