"""Notebooks run from any working directory: their paths resolve from the repository (lachesis.paths), a missing
input is an error naming it; the numbers they write are stable to 12 significant digits (lachesis.plotting)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lachesis.paths import repo_path, repo_root
from lachesis.plotting import DIGITS, save_numbers, stable_numbers

REPO = Path(__file__).resolve().parents[1]


def test_relative_paths_resolve_from_the_repository_whatever_the_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert repo_root() == REPO
    assert repo_path("build/figures") == REPO / "build" / "figures"
    assert repo_path(tmp_path / "x") == tmp_path / "x"  # an absolute path as given
    assert repo_path("tests/fixtures/traces", must_exist=True).is_dir()


def test_a_missing_input_is_an_error_naming_the_parameter(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"trace: .*no_such_trace does not exist .*repository root"):
        repo_path("no_such_trace", must_exist=True, what="trace")


def test_written_numbers_are_stable_to_twelve_significant_digits(tmp_path) -> None:
    # two machines' last bits (the issue's example) write the same bytes
    a = save_numbers(pd.DataFrame({"x": [0.056843444310304970], "n": [3], "s": ["t"]}), tmp_path / "a", "t")
    b = save_numbers(pd.DataFrame({"x": [0.056843444310304955], "n": [3], "s": ["t"]}), tmp_path / "b", "t")
    assert a.read_bytes() == b.read_bytes() and b"0.0568434443103," in a.read_bytes()
    j = save_numbers({"v": [1 / 3, np.float64(2 / 3)], "k": {"w": 0.1 + 0.2}, "i": 7}, tmp_path, "j")
    assert json.loads(j.read_text()) == {"v": [0.333333333333, 0.666666666667], "k": {"w": 0.3}, "i": 7}
    assert stable_numbers(float("inf")) == float("inf") and DIGITS == 12
