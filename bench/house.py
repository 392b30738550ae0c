"""The house's figures, measured from the tree: what a maintainer taking over reads first.

Prints a markdown table (and writes bench/results/house.md with ``--write``): import circles
(TYPE_CHECKING imports included), the simulator's private accesses from outside its fleet,
the `controller` and `agent` command bodies, CLI modules importing adapters, live patch ids and
their ask sites, modules over 350 lines, top-level modules in remedy/, the README's length.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("remedy", "contract", "workflows", "activities", "workers", "adapters", "twin", "chaos")
CODE = (*PACKAGES, "kubeapi", "remedy_job")


def circles() -> list[list[str]]:
    """Strongly connected groups of modules (more than one) in the import graph."""
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group: list[str] = []
            while (member := stack.pop()) != module:
                group.append(member)
            group.append(module)
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(20000)
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def private_sim_accesses() -> int:
    """`<something>fleet._name` in the simulator outside the fleet's own module."""
    count = 0
    for path in (ROOT / "adapters" / "sim").rglob("*.py"):
        if path.name == "fleet.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            if ast.unparse(node.value).lower().endswith("fleet"):
                count += 1
    return count


def command_body(name: str) -> tuple[int, int]:
    """Lines of the click command's function and its number of options."""
    import typer.main

    from workers.cli import app

    group = typer.main.get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]
    lines, _ = inspect.getsourcelines(_body(command.callback))
    body = [line for line in lines if not line.lstrip().startswith("@")]
    return len(body), len(command.params)


def _body(function: Any) -> Any:
    """The function that does the command's work: typer's wrapper, and a command made from a
    settings model (workers/flags), call it through closures."""
    for _ in range(4):
        inner = inspect.getclosurevars(function).nonlocals
        found = inner.get("run") or inner.get("callback")
        if not callable(found):
            return function
        function = found
    return function


def cli_modules_importing_adapters() -> int:
    graph = grimp.build_graph("workers", "adapters", cache_dir=None)
    modules = {m for m in graph.modules if m.startswith("workers.cli")}
    return sum(
        1
        for m in modules
        if any(i.startswith("adapters") for i in graph.find_modules_directly_imported_by(m))
    )


def patches() -> tuple[int, int]:
    """Distinct patch ids asked (``patched`` / ``deprecate_patch``, constants resolved) in
    workflows/ and contract/, and the places in workflows/ that ask."""
    names: dict[str, str] = {}
    calls: list[tuple[str, ast.expr]] = []
    for folder in ("workflows", "contract"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                            names[target.id] = node.value.value
                if isinstance(node, ast.Call) and node.args:
                    func = ast.unparse(node.func)
                    if func.split(".")[-1] in ("patched", "deprecate_patch"):
                        calls.append((folder, node.args[0]))
    ids: set[str] = set()
    for _, arg in calls:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            ids.add(arg.value)
        elif isinstance(arg, ast.Name | ast.Attribute):
            name = arg.id if isinstance(arg, ast.Name) else arg.attr
            if name in names:
                ids.add(names[name])
    return len(ids), sum(1 for folder, _ in calls if folder == "workflows")


def long_modules(limit: int = 350) -> list[tuple[str, int]]:
    found = []
    for folder in CODE:
        for path in (ROOT / folder).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found.append((str(path.relative_to(ROOT)), lines))
    return sorted(found, key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/house.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    groups = circles()
    controller_lines, controller_params = command_body("controller")
    agent_lines, agent_params = command_body("agent")
    patch_ids, ask_sites = patches()
    long = long_modules()
    top = [p for p in (ROOT / "remedy").iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    rows = [
        ("import circles (TYPE_CHECKING included)", str(len(groups))),
        ("private accesses into the sim's fleet", str(private_sim_accesses())),
        ("`remedy controller` body / options", f"{controller_lines} lines / {controller_params}"),
        ("`remedy agent` body / options", f"{agent_lines} lines / {agent_params}"),
        ("workers.cli modules importing adapters", str(cli_modules_importing_adapters())),
        ("live patch ids / ask sites in workflows/", f"{patch_ids} / {ask_sites}"),
        ("modules over 350 lines", str(len(long))),
        ("top-level modules in remedy/", str(len(top))),
        ("README lines", str(len((ROOT / "README.md").read_text().splitlines()))),
    ]
    text = "| figure | now |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
    text += "".join(f"\ncircle: {' ↔ '.join(group)}" for group in groups)
    text += "".join(f"\nover 350: {path} ({lines})" for path, lines in long)
    print(text)
    if args.write:
        (ROOT / "bench" / "results" / "house.md").write_text(
            "# The house's figures (`python bench/house.py --write`)\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
