"""What a command left behind, as the CLI tests check it: its one line on stderr, the files it wrote, nothing beside
them, and a write that fails as a full disk does."""

from __future__ import annotations

import errno
from pathlib import Path


def one_line(capsys) -> str:
    """The one line a command wrote to stderr: no traceback, no internal error."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "internal error" not in err[0] and "Traceback" not in err[0], err[0]
    return err[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def siblings(folder: Path) -> list[str]:
    """What lies beside ``folder`` (a temporary folder left behind would)."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name != folder.name)


def full_disk(*a, **k):
    """A write that fails as a full disk does."""
    raise OSError(errno.ENOSPC, "No space left on device")
