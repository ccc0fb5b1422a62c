"""Test-session setup shared by every test module.

Points the dataset registry at the shared copy of the public traces (offline override) and keeps
matplotlib headless.  Notebook kernels started by nbval inherit this environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LACHESIS_SHARED", REPO.parent / "shared"))

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("LACHESIS_SHARED", str(SHARED))
if (SHARED / "data" / "traces").is_dir():
    os.environ.setdefault("LACHESIS_DATA", str(SHARED / "data" / "traces"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only shared folder (paper, traces, validation tables) beside the repository."""
    if not SHARED.is_dir():
        pytest.skip(f"shared folder not found at {SHARED} (set LACHESIS_SHARED)")
    return SHARED
