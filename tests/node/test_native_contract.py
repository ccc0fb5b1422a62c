"""The contract between the native core (lachesis/node/native/) and the Python it mirrors, checked where no
differential test looks: every Python name a C++ comment cites exists; every constant the core keeps a copy of
equals Python's (the rest it is handed); the native policy classes are the registry's; the native differential
tests draw their policies from the registry; the type stubs are the module's; and a compiled core that is missing,
damaged or stale is refused with one line before it is loaded."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import shutil
import sys
import warnings
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from fixture_paths import REPO
from own_policies import NATIVE_POLICIES

import lachesis
from lachesis.node import native
from lachesis.node.native import build_record
from lachesis.registry import POLICY_REGISTRY

NATIVE = REPO / "lachesis" / "node" / "native"
FILE_SUFFIXES = {"py", "cpp", "hpp", "md", "json", "toml", "yaml", "so", "pyi"}
_DOTTED = re.compile(r"(?<![\w.:])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")


def _modules() -> dict[str, list[str]]:
    """Each module's short names (``allocator``, ``memory.allocator``) -> the lachesis modules they may mean."""
    names: dict[str, list[str]] = {}
    root = Path(lachesis.__file__).parent
    for p in root.rglob("*.py"):
        parts = p.relative_to(root.parent).with_suffix("").parts
        mod = ".".join(parts).removesuffix(".__init__")
        tail = mod.split(".")[1:]
        for k in range(1, len(tail) + 1):
            names.setdefault(".".join(tail[-k:]), []).append(mod)
    return names


MODULES = _modules()


def _classes() -> dict[str, list[type]]:
    """Every class the native core may cite by name: those of the base, the memory and node wings, and simpy's."""
    import simpy.core
    import simpy.events

    wanted = [m for ms in MODULES.values() for m in ms
              if m.split(".")[1] in ("kv", "config", "registry", "memory", "node") and ".native" not in m]
    found: dict[str, list[type]] = {}
    for mod in {m: importlib.import_module(m) for m in wanted}.values():
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj.__module__ == mod.__name__:
                found.setdefault(name, []).append(obj)
    for mod in (simpy.core, simpy.events):
        for name, obj in vars(mod).items():
            if inspect.isclass(obj):
                found.setdefault(name, []).append(obj)
    return {k: list({id(c): c for c in v}.values()) for k, v in found.items()}


def _has_instance_attribute(cls: type, attr: str) -> bool:
    """A field, slot, annotation or ``self.<attr>`` assignment of the class or a base."""
    for c in cls.__mro__:
        if attr in getattr(c, "__dataclass_fields__", {}) or attr in getattr(c, "__slots__", ()):
            return True
        if attr in getattr(c, "__annotations__", {}):
            return True
        try:
            src = inspect.getsource(c)
        except (OSError, TypeError):
            continue
        if re.search(rf"self\.{re.escape(attr)}\b[^=\n]*=(?!=)", src):
            return True
    return False


def _resolve_in(obj: object, rest: list[str]) -> str | None:
    """Walk ``rest`` from ``obj``; why it fails, or None."""
    for attr in rest:
        if isinstance(obj, ModuleType) and not hasattr(obj, attr):
            try:
                importlib.import_module(f"{obj.__name__}.{attr}")
            except ImportError:
                pass
        if hasattr(obj, attr):
            found = getattr(obj, attr)
            home = getattr(found, "__module__", None)
            if isinstance(obj, ModuleType) and (inspect.isclass(found) or inspect.isfunction(found)) \
                    and home != obj.__name__:
                return f"{obj.__name__}.{attr} is {home}.{attr} (cite it where it is defined)"
            obj = found
            continue
        if inspect.isclass(obj) and _has_instance_attribute(obj, attr):
            return None  # an instance attribute: its type is not followed further
        return f"{obj!r} has no attribute {attr!r}"
    return None


def resolve(name: str, classes: dict[str, list[type]]) -> str | None:
    """Why a dotted name cited in a comment names nothing in Python, or None when it resolves (or is not a Python
    name: a file name, a local variable's attribute)."""
    parts = name.split(".")
    if parts[-1] in FILE_SUFFIXES:
        return None
    if parts[0] == "simpy":
        for k in range(len(parts), 0, -1):
            try:
                return _resolve_in(importlib.import_module(".".join(parts[:k])), parts[k:])
            except ImportError:
                continue
        return f"{name}: no such simpy module"
    if parts[0] == "lachesis":
        parts = parts[1:]
    for k in range(len(parts), 0, -1):  # the longest module prefix
        mods = MODULES.get(".".join(parts[:k]))
        if mods:
            if len(mods) > 1:
                return f"{name}: {'.'.join(parts[:k])!r} is ambiguous ({mods}); qualify it"
            return _resolve_in(importlib.import_module(mods[0]), parts[k:])
    if parts[0][:1].isupper() or parts[0].startswith("_"):
        owners = classes.get(parts[0], [])
        if not owners:
            return f"{name}: no Python class {parts[0]!r}"
        reasons = [_resolve_in(c, parts[1:]) for c in owners]
        return None if any(r is None for r in reasons) else f"{name}: {reasons[0]}"
    return None  # a local name's attribute (np.maximum, row.n_blocks): not a citation


def cited_names(text: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every dotted name in a C++ source's ``//`` comments."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        i = line.find("//")
        if i >= 0:
            out += [(n, m.group(1)) for m in _DOTTED.finditer(line[i + 2:])]
    return out


def stale_citations(root: Path = NATIVE) -> list[str]:
    classes = _classes()
    bad = []
    for f in sorted(root.rglob("*.[ch]pp")):
        for n, name in cited_names(f.read_text(encoding="utf-8")):
            why = resolve(name, classes)
            if why is not None:
                bad.append(f"{f.relative_to(root.parent)}:{n}: {why}")
    return bad


def test_every_python_name_a_cpp_comment_cites_exists():
    assert stale_citations() == []


def test_a_stale_citation_is_found(tmp_path):
    """The check itself: names that moved, a misspelt attribute, an unknown class; file names, a local's attributes,
    instance attributes and simpy's names pass."""
    (tmp_path / "x.cpp").write_text("int x;  // kv.PlacementStats, kv.EMA_ALPHA, live_index.SegmentRow\n"
                                    "// Memory.evnts and NoSuchClass.x; node_memory.hpp, np.maximum, r.n_blocks\n"
                                    "// decode.DecodeEngine.tpot, simpy.core.URGENT, Process._resume, kv.Tier.HBM\n",
                                    encoding="utf-8")
    bad = stale_citations(tmp_path)
    assert [b.split(":")[1] for b in bad] == ["1", "1", "1", "2", "2"], bad
    for cited in ("PlacementStats", "EMA_ALPHA", "SegmentRow", "evnts", "NoSuchClass"):
        assert sum(cited in b for b in bad) == 1, (cited, bad)


@pytest.fixture(scope="module")
def core() -> ModuleType:
    c = native.core()
    if c is None:  # pragma: no cover - a machine without a C++ compiler
        pytest.skip("the native core is not built")
    return c


def _resolve_value(name: str):
    mod, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


def test_every_constant_the_core_copies_equals_pythons(core):
    """What the core copies (the rest it is handed: the classes, the memory's constants, the policies' knobs)."""
    copied = core.copied_constants()
    assert copied, "the core lists what it copies"
    for name, value in copied.items():
        assert _resolve_value(name) == value, f"{name}: the core has {value!r}, Python {_resolve_value(name)!r}"


def test_what_the_core_is_handed_is_pythons(core):
    from lachesis.kv import SEG_CLASSES
    from lachesis.node.node_memory import AGED_CLASS

    cls = native.classes()
    assert cls.names == list(SEG_CLASSES) and cls.names[cls.aged] == AGED_CLASS
    assert (cls.names[cls.worker], cls.names[cls.reviewer]) == ("worker", "reviewer")


def test_the_native_policy_classes_are_the_registrys(core):
    assert set(core.policy_kinds()) == {e.native for e in POLICY_REGISTRY if e.native is not None}
    plan = SimpleNamespace(lists=lambda: SimpleNamespace(seg_class=[], seg_role=[], seg_key=[]))
    for e in POLICY_REGISTRY:
        assert native.policy(e.name, plan).calls_python == (e.native is None), e.name


def test_the_native_differential_tests_draw_their_policies_from_the_registry():
    assert {e.name for e in POLICY_REGISTRY} <= set(NATIVE_POLICIES)
    for test in ("test_native_run.py", "test_native_memory.py"):
        tree = ast.parse((REPO / "tests" / "node" / test).read_text(encoding="utf-8"))
        assigned = {ast.unparse(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "POLICIES" for t in n.targets)}
        assert assigned == {"NATIVE_POLICIES"}, f"{test}: POLICIES = {assigned}"


def test_the_type_stubs_are_the_modules(core):
    """lachesis/node/_core.pyi, what mypy checks the calls into the core against, is what pybind11-stubgen writes
    for the built module (``make stubs`` after a binding changes)."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import core_stubs
    finally:
        sys.path.pop(0)
    assert core_stubs.stubs() == core_stubs.STUBS.read_text(encoding="utf-8"), "out of date: run make stubs"


# -- loading: a missing, damaged or stale core is refused before it is loaded, in one line -----------------------


def _load_with(monkeypatch, origin: Path | None, sources: Path | None = None) -> tuple[object, list[str]]:
    """native.core() with the compiled module found at ``origin`` (None: not built); its result and warnings."""
    spec = None if origin is None else SimpleNamespace(origin=str(origin))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: spec if name == "lachesis.node._core" else real(name, *a))
    if sources is not None:
        monkeypatch.setattr(build_record, "SOURCES", sources)
    native.core.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = native.core()
            again = native.core()
        assert got is again
        return got, [str(w.message) for w in caught]
    finally:
        monkeypatch.undo()
        native.core.cache_clear()


def _copy_core(tmp_path: Path) -> Path:
    spec = importlib.util.find_spec("lachesis.node._core")
    src = Path(spec.origin)
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    shutil.copy(build_record.record_path(src), build_record.record_path(dst))
    return dst


def test_a_missing_core_is_said_once_pointing_at_the_readme(monkeypatch):
    got, said = _load_with(monkeypatch, None)
    assert got is None and len(said) == 1 and "\n" not in said[0]
    assert "not built" in said[0] and "'Without a compiler'" in said[0] and "Python reference" in said[0]


def test_a_truncated_core_is_refused_before_it_is_loaded(core, monkeypatch, tmp_path):
    """A truncated shared object would crash the interpreter when loaded (SIGBUS): its size is checked first."""
    so = _copy_core(tmp_path)
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 3])
    got, said = _load_with(monkeypatch, so)
    assert got is None and len(said) == 1 and "\n" not in said[0]
    assert "damaged" in said[0] and "truncated" in said[0] and "not built" not in said[0]


def test_a_corrupt_core_is_refused_not_called_unbuilt(core, monkeypatch, tmp_path):
    so = _copy_core(tmp_path)
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    so.write_bytes(bytes(data))
    got, said = _load_with(monkeypatch, so)
    assert got is None and len(said) == 1 and "damaged" in said[0] and "not built" not in said[0]


def test_a_stale_core_is_refused_in_one_line(core, monkeypatch, tmp_path):
    """Built for another seam version, or from other sources: one line naming why, not an AttributeError."""
    so = _copy_core(tmp_path)
    monkeypatch.setattr(build_record, "INTERFACE", build_record.INTERFACE + 1)
    got, said = _load_with(monkeypatch, so)
    assert got is None and len(said) == 1 and "stale" in said[0] and "seam's version" in said[0]
    srcs = tmp_path / "src"
    shutil.copytree(NATIVE, srcs)
    (srcs / "run" / "events.cpp").write_text("// edited\n", encoding="utf-8")
    got, said = _load_with(monkeypatch, so, sources=srcs)
    assert got is None and len(said) == 1 and "stale" in said[0] and "other native sources" in said[0]
    monkeypatch.setattr(native, "INTERFACE", native.INTERFACE + 1)  # the loaded module's own version
    native.core.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert native.core() is None
    finally:
        monkeypatch.undo()
        native.core.cache_clear()
    assert len(caught) == 1 and "is stale (seam version" in str(caught[0].message)
    assert native.core() is not None


def test_an_unloadable_core_says_why_once(core, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_core(name, globals=None, locals=None, fromlist=(), level=0):
        if fromlist and "_core" in fromlist:
            raise ImportError("undefined symbol: _ZN8lachesis")
        return real(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_core)
    native.core.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert native.core() is None and native.core() is None
    finally:
        monkeypatch.undo()
        native.core.cache_clear()
    assert len(caught) == 1 and "does not load (undefined symbol" in str(caught[0].message)
    assert native.core() is not None


def test_a_truncated_core_does_not_crash_a_fresh_interpreter(core, tmp_path):
    """The probe itself: a copy of the package whose compiled core was cut in half (loading it would kill the
    interpreter with SIGBUS) imports, says why in one line, and runs on the reference."""
    import os
    import subprocess

    pkg = Path(lachesis.__file__).parent
    shutil.copytree(pkg, tmp_path / "lachesis", ignore=shutil.ignore_patterns("__pycache__"))
    so = tmp_path / "lachesis" / "node" / Path(importlib.util.find_spec("lachesis.node._core").origin).name
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", "from lachesis.node import native; print(native.core())"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "None", (out.returncode, out.stderr[-500:])
    said = [line for line in out.stderr.splitlines() if "lachesis:" in line]
    assert len(said) == 1 and "damaged" in said[0] and "truncated" in said[0]
