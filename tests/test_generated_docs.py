"""The docs' generated tables (tests/generated_docs.py) are what their code writes: the table of
actions in docs/runbooks.md is the action table's (remedy/actions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.generated_docs import REGIONS, ROOT, generated, regenerate, with_region


def test_every_committed_doc_is_what_its_code_generates() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in generated().items() if p.read_text() != text]
    assert not stale, f"run `python -m tests.generated_docs`: {stale} differ from their code"


def test_regenerating_rewrites_only_the_region(tmp_path: Path) -> None:
    doc = tmp_path / REGIONS["actions"][0]
    doc.parent.mkdir(parents=True)
    name = "actions"
    old = with_region(f"before\n{_markers(name)}\nafter\n", name, "| stale |")
    doc.write_text(old)
    assert regenerate(tmp_path) == [doc]
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith("after\n")
    assert "| stale |" not in text and "| `reboot` |" in text
    assert regenerate(tmp_path) == []


def test_a_doc_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="no region"):
        with_region("no markers here\n", "actions", "| x |")


def _markers(name: str) -> str:
    from tests.generated_docs import begin, end

    return f"{begin(name)}\n\n{end(name)}"
