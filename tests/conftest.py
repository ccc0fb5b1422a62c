"""Test-session setup shared by every test module.

Nothing here reaches beside the repository: the public-trace tests read the committed excerpts in
``tests/fixtures/traces`` (fixture ``trace_fixtures``; see its README). The run is hermetic: the
offline override ``LACHESIS_DATA`` is unset and the dataset cache is a fresh temporary folder, so no
test — nor a notebook kernel started by nbval, which inherits this environment — reads a data mirror
or a user's cache. matplotlib is headless.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from fixture_paths import TRACE_FIXTURES
from hypothesis import settings

# Property tests draw the same examples on every run and machine, and keep no example database: an unlucky draw
# can neither come and go between runs nor become sticky in .hypothesis/ (a failing draw is kept as an explicit
# @example instead).  HYPOTHESIS_PROFILE=explore draws afresh, to hunt for new failures locally.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.pop("LACHESIS_DATA", None)
_CACHE = tempfile.mkdtemp(prefix="lachesis-test-cache-")
os.environ["LACHESIS_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)


@pytest.fixture(scope="session")
def trace_fixtures() -> Path:
    """The committed excerpts of the public trace sources, one sub-folder per source."""
    return TRACE_FIXTURES
