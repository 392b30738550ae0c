"""The README stays a page a newcomer finishes, every relative link in it, CHANGELOG.md and
docs/ leads somewhere that exists (file and heading), and docs/architecture.md's seams table
and file references match the code."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PAGES = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
# The folders a path in the docs starts with; anything else in backticks with a slash is a
# label, an image or a URL path (`remedy.io/pool`, `nvidia.com/gpu`).
TOP = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))
LINK = re.compile(r"!?\[(?:[^\]]|\n)*?\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def prose(text: str) -> str:
    """The text outside fenced code blocks, where links and headings are what they look like."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(page.read_text()), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_at_most_300_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 300, f"README.md has {lines} lines: move the detail into docs/"


def test_the_readme_starts_with_the_two_commands() -> None:
    first = FENCE.search(README.read_text())
    assert first and "make demo" in first.group(0) and "make test" in first.group(0)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_doc_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(README)}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"not reachable from README.md: {unlinked}"


@cache
def protocols() -> dict[str, Path]:
    """Every ``typing.Protocol`` class under remedy/, by name."""
    found = {}
    for path in (ROOT / "remedy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(b, ast.Name) and b.id == "Protocol")
                or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
                for b in node.bases
            ):
                found[node.name] = path
    return found


def table_names(section: str) -> set[str]:
    """The class names in backticks in the protocol column of a section's tables (the second
    column, or the first of a two-column table), before any parenthesis."""
    names = set()
    for row in re.findall(r"^\|(.+)\|$", section, re.M):
        cells = [c.strip() for c in row.split("|")]
        column = cells[1] if len(cells) > 2 else cells[0]
        names |= set(re.findall(r"`([A-Z][A-Za-z]+)`", column.split("(")[0]))
    return names


def seams_section() -> str:
    text = ARCHITECTURE.read_text()
    return text.split("## The seams", 1)[1].split("\n## ", 1)[0]


def test_the_seams_table_names_every_protocol_and_only_protocols() -> None:
    named = table_names(seams_section())
    assert len(protocols()) >= 23
    missing = sorted(set(protocols()) - named)
    assert not missing, f"Protocols not in docs/architecture.md's seams tables: {missing}"
    not_protocols = sorted(named - set(protocols()))
    assert not not_protocols, f"in the seams tables but no Protocol in remedy/: {not_protocols}"


# "the ``Replacer`` seam", "The NodeHost seam": a name in backticks, or a CamelCase one.
SEAM_NAMED = re.compile(r"``?([A-Z]\w+)``? seam\b|\b([A-Z][a-z]+[A-Z]\w+) seam\b")


def test_the_seams_the_code_names_are_in_the_table() -> None:
    """A docstring that calls something "the X seam" names a protocol the table lists."""
    named = table_names(seams_section())
    said = set()
    for folder in ("remedy", "adapters", "activities", "workers"):
        for path in (ROOT / folder).rglob("*.py"):
            for quoted, camel in SEAM_NAMED.findall(path.read_text()):
                said.add(quoted or camel)
    assert said, "no docstring names a seam: the pattern is stale"
    assert not said - named, f"seams named in the code, missing from the table: {said - named}"


def repo_paths(text: str) -> set[str]:
    """Paths in backticks that start with one of the repository's folders (no placeholders)."""
    out = set()
    for token in re.findall(r"`([^`\s]+)`", prose(text)):
        token = token.rstrip(".,:;")
        if "/" in token and token.split("/", 1)[0] in TOP and not re.search(r"[<>*{}]", token):
            out.add(token.split(":", 1)[0])
    return out


def recipe_files() -> set[str]:
    """Files the worked recipes under examples/recipes/ create: named before they exist."""
    out = set()
    for patch in (ROOT / "examples" / "recipes").glob("*.patch"):
        out |= set(re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), re.M))
    return out


# CHANGELOG.md names files as they were when each issue landed: history, not a map.
MAPS = [p for p in PAGES if p.name != "CHANGELOG.md"]


@pytest.mark.parametrize("page", MAPS, ids=lambda p: p.name)
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    named = repo_paths(page.read_text()) - recipe_files()
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"
