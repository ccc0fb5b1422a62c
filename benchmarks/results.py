"""Each benchmark script's section of ``benchmarks/RESULTS.md``: replaced by its latest run, with the machine state.

A section runs from its ``## <title>`` line to the next ``## `` heading; a script rewrites only its own
section (appended the first time), so measurements live in RESULTS.md and never in docstrings.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().with_name("RESULTS.md")


def machine() -> str:
    """One line: the commit measured (``-dirty`` with uncommitted changes), when, and how loaded the machine was."""
    root = RESULTS.parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        commit += "-dirty" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown commit"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return (f"commit {commit}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
            f"load average {load}, Python {platform.python_version()}")


def record(title: str, lines: list[str], path: Path = RESULTS) -> Path:
    """Replace (or append) the section ``## <title>`` of ``path`` with ``lines`` as a code block, the
    command that produced them and :func:`machine`; written atomically."""
    from lachesis.io import write_text

    command = " ".join([Path(sys.argv[0]).name] + sys.argv[1:])
    body = (f"## {title}\n\n`.venv/bin/python benchmarks/{command}` ({machine()}):\n\n```\n"
            + "\n".join(lines).rstrip() + "\n```\n")
    text = path.read_text(encoding="utf-8") if path.exists() else "# Measurements\n"
    section = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if section.search(text):
        text = section.sub(lambda _: body + "\n", text, count=1)
    else:
        text = text.rstrip() + "\n\n" + body
    return write_text(path, text.rstrip() + "\n")
