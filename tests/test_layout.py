"""The package's floor plan (docs/design.md §1): the base, the wings and the entry points, one table each, in order;
every module imports only modules above it (in its own table or a table above), every module is listed, and the
imports (module-level and inside functions) form no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lachesis

ROOT = Path(lachesis.__file__).parent
DESIGN = ROOT.parent / "docs" / "design.md"

#: the floors in the order the design's tables give them: the base, the wings by paper noun, the entry points
FLOORS = ("lachesis/", "lachesis/traces/", "lachesis/analysis/", "lachesis/memory/", "lachesis/node/",
          "lachesis/evaluation/", "lachesis/ (entry points)")


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


def _design_tables() -> list[tuple[str, list[str]]]:
    """Each floor's heading (``**`lachesis/node/`**``) and its module names in table order."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("## 1. Layout"):text.index("\n## 2.")]
    floors = []
    for m in re.finditer(r"\*\*`([^`]+)`\*\* —[^\n]*\n\n\| module \| noun \(paper\) \| job \|\n\|---\|---\|---\|\n"
                         r"((?:\|[^\n]*\n)+)", section):
        rows = m.group(2).splitlines()
        floors.append((m.group(1), [re.findall(r"`([a-z_]+)`", r.split("|")[1])[0] for r in rows]))
    return floors


def _wing(floor: str) -> str:
    """``lachesis/node/`` -> ``node``; the base and the entry points live in the package's own folder -> ``""``."""
    return floor.removeprefix("lachesis/").partition("/")[0].partition(" ")[0]


def _design_order() -> list[str]:
    """Rooms (``models``, ``node.simulator``, ``traces.adapters``) in the order of the design's tables."""
    return [f"{_wing(f)}.{m}" if _wing(f) else m for f, mods in _design_tables() for m in mods]


def _room(module: str) -> str:
    """The table entry a module belongs to: ``lachesis.traces.adapters.tau2`` -> ``traces.adapters``,
    ``lachesis.cli`` -> ``cli``, a wing's package itself (``lachesis.node``) -> ``node``."""
    parts = module.split(".")[1:]
    return ".".join(parts[:2]) if parts[0] in WINGS else parts[0]


WINGS = {_wing(f) for f in FLOORS} - {""}


def test_the_design_gives_the_floors_in_order():
    assert [f for f, _ in _design_tables()] == list(FLOORS)


def test_every_wing_is_a_folder_and_every_module_is_listed_once():
    order = _design_order()
    assert len(order) == len(set(order)), "a module listed twice in docs/design.md §1"
    rooms = {_room(m) for m in _modules() if m.count(".") >= 1} - {"__main__"} - WINGS
    assert rooms == set(order), (f"listed but absent: {sorted(set(order) - rooms)}; "
                                 f"present but not listed: {sorted(rooms - set(order))}")
    assert {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} == WINGS


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


def _upward_imports(graph: dict[str, set[str]], order: list[str]) -> list[str]:
    """Each import of a module listed at or below the importer's row (another room), as ``importer -> imported``."""
    rank = {name: i for i, name in enumerate(order)}
    found = []
    for m, deps in sorted(graph.items()):
        if m in ("lachesis", "lachesis.__main__") or _room(m) in WINGS:
            continue
        for d in sorted(deps):
            if d == "lachesis" or _room(d) == _room(m) or _room(d) in WINGS:
                continue
            if rank[_room(d)] >= rank[_room(m)]:
                found.append(f"{m} -> {d} ({_room(d)} is listed after {_room(m)})")
    return found


def test_every_module_imports_only_modules_above_it_in_the_design_tables():
    assert _upward_imports(_imports(_modules()), _design_order()) == []


def test_an_import_from_a_lower_row_or_wing_is_found():
    """The check itself: the step model listed above the plan it prices, and a wing importing the wing below it."""
    graph = {"lachesis.node.plan": set(), "lachesis.node.step": {"lachesis.node.plan"},
             "lachesis.traces.trace": {"lachesis.analysis.segments"}, "lachesis.analysis.segments": set()}
    order = ["traces.trace", "analysis.segments", "node.step", "node.plan"]
    assert _upward_imports(graph, order) == [
        "lachesis.node.step -> lachesis.node.plan (node.plan is listed after node.step)",
        "lachesis.traces.trace -> lachesis.analysis.segments (analysis.segments is listed after traces.trace)"]


def test_a_wing_package_imports_nothing():
    """A wing's ``__init__`` only names its noun, so importing one module of a wing loads no other."""
    graph = _imports(_modules())
    assert all(not graph[f"lachesis.{w}"] for w in WINGS)


def _native_table() -> list[tuple[list[str], str]]:
    """The native core's rows in docs/design.md §1: (its files, the Python room it mirrors)."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("## 1. Layout"):text.index("\n## 2.")]
    m = re.search(r"\| native files \| mirrors \| what \|\n\|---\|---\|---\|\n((?:\|[^\n]*\n)+)", section)
    assert m, "docs/design.md §1 has no native-files table"
    rows = []
    for r in m.group(1).splitlines():
        files, mirrors = r.split("|")[1:3]
        rows.append((re.findall(r"`([^`]+)`", files), re.findall(r"`([^`]+)`", mirrors)[0]))
    return rows


def test_every_native_file_pairs_with_the_python_room_it_mirrors():
    """One row per mirrored room; every C++ file of lachesis/node/native/ listed once; each room one the tables
    above list (or simpy's event loop, which the reference simulator drives)."""
    rows = _native_table()
    listed = [f for files, _ in rows for f in files]
    native = ROOT / "node" / "native"
    present = sorted(p.relative_to(native).as_posix() for p in native.rglob("*") if p.suffix in (".cpp", ".hpp"))
    assert len(listed) == len(set(listed)), "a native file listed twice"
    assert sorted(listed) == present, (f"listed but absent: {sorted(set(listed) - set(present))}; "
                                      f"present but not listed: {sorted(set(present) - set(listed))}")
    rooms = set(_design_order()) | {"simpy"}
    assert [m for _, m in rows if m not in rooms] == []
    assert len({m for _, m in rows}) == len(rows), "a room mirrored by two rows"
