"""The sim is driven through its public interface: nothing outside ``adapters/sim/state.py``
and ``adapters/sim/fleet.py`` reads or calls a private member of ``SimState``/``SimFleet``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWNERS = {ROOT / "adapters/sim/state.py", ROOT / "adapters/sim/fleet.py"}


def _private_members() -> set[str]:
    """The private names the fleet's classes define: attributes set on ``self``, methods."""
    names: set[str] = set()
    for path in OWNERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
                names.add(node.name)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "self" and node.attr.startswith("_"):
                    names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def private_accesses() -> list[str]:
    """``path:line name`` of each access to one of those names on anything but ``self``."""
    private, found = _private_members(), []
    for path in sorted(ROOT.rglob("*.py")):
        if path in OWNERS or ".venv" in path.parts or "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in private:
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
    return found


def test_no_view_reaches_into_the_fleet() -> None:
    assert private_accesses() == []
