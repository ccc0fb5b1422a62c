"""The package's floor plan (docs/design.md §1): every module imports only modules above it in the
design's module table, and the imports (module-level and inside functions) form no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lachesis

ROOT = Path(lachesis.__file__).parent
DESIGN = ROOT.parent / "docs" / "design.md"


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in ROOT.rglob("*.py")}


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Package modules each module imports, at module level or inside a function."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                graph[m] |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.rsplit(".", node.level - 1)[0] if node.level > 1 else pkg
                    base = f"{up}.{node.module}" if node.module else up
                graph[m] |= {x for x in [base] + [f"{base}.{a.name}" for a in node.names] if x in mods and x != m}
    return graph


def _design_order() -> list[str]:
    """Module names in the order of the design's module table (a row may name several, in order)."""
    text = DESIGN.read_text(encoding="utf-8")
    table = text[text.index("| module | noun (paper) | job |"):]
    table = table[:table.index("\n\n")]
    order: list[str] = []
    for row in table.splitlines()[2:]:
        order += re.findall(r"`([a-z_]+)`", row.split("|")[1])
    return order


def _room(module: str) -> str:
    """The table entry a module belongs to: ``lachesis.adapters.tau2`` -> ``adapters``."""
    return module.split(".")[1]


def test_no_import_cycles_in_the_package():
    """The package's module-level and function-level imports form no cycle."""
    graph = _imports(_modules())
    state: dict[str, int] = {}

    def visit(u: str, path: list[str]) -> None:
        state[u] = 1
        for v in sorted(graph[u]):
            assert state.get(v) != 1, "import cycle: " + " -> ".join(path[path.index(v):] + [v])  # v is on the path
            if v not in state:
                visit(v, path + [v])
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_every_module_imports_only_modules_above_it_in_the_design_table():
    mods = _modules()
    order = _design_order()
    rank = {name: i for i, name in enumerate(order)}
    rooms = {_room(m) for m in mods if m.count(".") >= 1} - {"__main__"}
    unplaced = rooms - set(rank)
    assert not unplaced, f"modules missing from the table of docs/design.md §1: {sorted(unplaced)}"
    for m, deps in _imports(mods).items():
        if m in ("lachesis", "lachesis.__main__") or _room(m) not in rank:
            continue
        for d in deps:
            if d == "lachesis" or _room(d) == _room(m) or _room(d) not in rank:
                continue
            assert rank[_room(d)] < rank[_room(m)], (f"{m} imports {d}, which docs/design.md §1 lists below it "
                                                     f"({_room(d)} after {_room(m)})")
