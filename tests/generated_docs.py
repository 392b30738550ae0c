"""The docs' tables that are generated from the code that declares them, between markers.

``python -m tests.generated_docs`` rewrites each region from its code; the test beside
(tests/test_generated_docs.py) fails while a committed doc differs from what it generates.
So a table is edited in one place, the code, and never by hand in the docs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from contract.metrics_doc import metrics_markdown
from remedy.core.actions import actions_markdown
from remedy.detection.probe.nic_link import thresholds_markdown
from remedy.detection.vocabulary import terms_markdown

ROOT = Path(__file__).resolve().parent.parent

# name → (the doc, what writes its table)
REGIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "actions": ("docs/runbooks.md", actions_markdown),
    "checks": ("docs/runbooks.md", terms_markdown),
    "nic-thresholds": ("docs/runbooks.md", thresholds_markdown),
    "metrics": ("docs/metrics.md", metrics_markdown),
}


def begin(name: str) -> str:
    return f"<!-- generated: {name} (python -m tests.generated_docs; edit the code, not here) -->"


def end(name: str) -> str:
    return f"<!-- end of generated: {name} -->"


def with_region(text: str, name: str, body: str) -> str:
    """``text`` with region ``name`` holding ``body``; ValueError when its markers are missing."""
    head, marker, rest = text.partition(begin(name) + "\n")
    _, closing, tail = rest.partition(end(name))
    if not marker or not closing:
        raise ValueError(f"no region {name!r}: mark it with {begin(name)!r} ... {end(name)!r}")
    return f"{head}{marker}{body}\n{closing}{tail}"


def generated(root: Path = ROOT) -> dict[Path, str]:
    """Each doc with a region, as its regions' code writes it."""
    docs: dict[Path, str] = {}
    for name, (doc, write) in REGIONS.items():
        path = root / doc
        docs[path] = with_region(docs.get(path) or path.read_text(), name, write())
    return docs


def regenerate(root: Path = ROOT) -> list[Path]:
    """Write every doc whose regions differ from their code; the docs written."""
    changed = [path for path, text in generated(root).items() if path.read_text() != text]
    for path in changed:
        path.write_text(generated(root)[path])
    return changed


if __name__ == "__main__":
    for written in regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT):
        print(f"wrote {written}")
