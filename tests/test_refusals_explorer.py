"""The explorer on an empty cache: it ends with one clear line naming the cell, the cache and the
command that computes it, not a KeyError from a table of no rows."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pandas as pd
import pytest

from lachesis import explorer


def test_an_empty_cache_ends_with_a_clear_message(tmp_path) -> None:
    sel = explorer.Selection()
    v = explorer.view(sel, tmp_path, [0.25], ["load"])
    with pytest.raises(ValueError) as e:
        explorer.require_cell(v, sel, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "holds nothing for this cell" in msg and str(tmp_path) in msg
    assert "lachesis explore --cache-dir" in msg and "--parts grid" in msg


def test_a_cache_without_the_selected_policy_says_which_it_has(tmp_path) -> None:
    sel = explorer.Selection(policy="lachesis")
    v = explorer.View(sel, pd.DataFrame({"policy": ["hbm_first"], "seed": [0]}), pd.DataFrame(), pd.DataFrame(),
                      pd.DataFrame())
    with pytest.raises(ValueError, match=r"holds no lachesis row \(only hbm_first\)"):
        explorer.require_cell(v, sel, tmp_path)


def test_an_unreadable_cache_and_a_full_cell(tmp_path) -> None:
    sel = explorer.Selection()
    with pytest.raises(ValueError, match="could not be read"):
        explorer.require_cell(None, sel, tmp_path)
    v = explorer.View(sel, pd.DataFrame({"policy": [sel.policy], "seed": [0]}), pd.DataFrame(), pd.DataFrame(),
                      pd.DataFrame())
    assert explorer.require_cell(v, sel, tmp_path) is v


def test_the_notebook_checks_the_cell_before_its_tables() -> None:
    nb = nbformat.read(Path(__file__).resolve().parents[1] / "notebooks" / "explorer.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    shown = next(i for i, s in enumerate(code) if "explorer.show(" in s)
    assert "explorer.require_cell(v, sel, cache_dir)" in code[shown]
    assert all("explorer.summary(v)" not in s for s in code[:shown])
