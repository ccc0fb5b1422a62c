"""The native core's build record: what ``setup.py`` writes beside the compiled module (its size, its SHA-256, the
seam's version it was built for and the digest of the sources it was built from), and the check
:func:`lachesis.node.native.core` makes before loading it, so a truncated, damaged or stale module is refused with one
line instead of crashing the interpreter or failing mid-run.  Standard library only: ``setup.py`` loads this file
before any dependency is installed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

#: the seam's version, compiled into the core (``setup.py``: LACHESIS_INTERFACE) and checked at load; raised whenever
#: a binding's signature or a seam object changes
INTERFACE = 2

#: the folder of the native sources, and what counts as one
SOURCES = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".cpp", ".hpp")


def source_digest(root: Path | None = None) -> str:
    """SHA-256 over the native sources' relative paths and contents, in path order (default: :data:`SOURCES`)."""
    root = SOURCES if root is None else root
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.suffix in SOURCE_SUFFIXES):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def record_path(module: Path) -> Path:
    """Where a compiled module's build record lives: beside it, its name plus ``.json``."""
    return module.with_name(module.name + ".json")


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write(module: Path, root: Path | None = None) -> Path:
    """Record a freshly built module (``setup.py`` calls this after the link)."""
    rec = dict(size=module.stat().st_size, sha256=file_digest(module), interface=INTERFACE, sources=source_digest(root))
    out = record_path(module)
    out.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    return out


def problem(module: Path, root: Path | None = None) -> str | None:
    """Why the compiled module must not be loaded (damaged, unrecorded, or built for other sources), or None."""
    root = SOURCES if root is None else root
    rec_path = record_path(module)
    try:
        rec = json.loads(rec_path.read_text(encoding="utf-8"))
        size, digest, interface, sources = rec["size"], rec["sha256"], rec["interface"], rec["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"has no readable build record ({rec_path.name}): it was not built by this package's setup.py"
    actual = module.stat().st_size
    if actual != size:
        return f"is damaged: {actual} bytes where its build recorded {size} (a truncated or interrupted copy)"
    if file_digest(module) != digest:
        return "is damaged: its contents differ from what its build recorded"
    if interface != INTERFACE:
        return f"is stale: built for the seam's version {interface}, these sources need {INTERFACE}"
    if any(root.rglob("*.cpp")) and source_digest(root) != sources:
        return "is stale: built from other native sources than these"
    return None
