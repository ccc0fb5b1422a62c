"""A tiny sensitivity study (multi-agent corpus at scale 0.05, CI preset), run once per test session and shared
by the sensitivity and explorer tests through its cache folder."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pandas as pd

from lachesis.evaluation import grid, sensitivity
from lachesis.node import capacity

CI = capacity.SEARCH_PRESETS["ci"]
SCALE = 0.05
KNOBS = ("load", "user_delay_median_s", "pe_cycles", "write_amplification", "laden_close")
VALUES = {"load": (0.5,), "user_delay_median_s": (600.0,), "pe_cycles": (50_000.0, 3_000.0)}


def cells() -> list[list[grid.Point]]:
    return sensitivity.study_cells(SCALE, 0, multi=dict(workload="multi_agent", configs=("1/7",)),
                                   single=dict(workload="tau3", configs=()))


@lru_cache(maxsize=1)
def tiny_study() -> tuple[Path, pd.DataFrame]:
    """(cache folder, rows of :func:`lachesis.evaluation.sensitivity.run`) for :func:`cells`, in-process."""
    d = Path(tempfile.mkdtemp(prefix="lachesis-sens-test-"))
    atexit.register(shutil.rmtree, d, True)
    runs = sensitivity.run(cells(), KNOBS, VALUES, params=CI, cache_dir=d, n_jobs=1, progress=False)
    return d, runs
